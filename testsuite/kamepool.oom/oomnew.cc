/* oomnew.cc -- kamepool.oom tests of operator new when memory really
   runs out, in a child process under a small RLIMIT_AS: a new_handler
   that frees a reserve lets new succeed on the retry, one that
   uninstalls itself makes new throw std::bad_alloc, nothrow and
   aligned forms return nullptr, and a handler that throws cannot make
   a nothrow new throw.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */
/* kptest-libs: -lkamepool-cxx */

#include <cstdint>
#include <cstdlib>
#include <new>

#include "kame_pool.h"
#include "kptest.h"
#include "oomlib.h"

static void *reserve;
static int calls;

/* Free the reserve on the first call; with nothing left to free,
   uninstall itself, so that new throws.  */
static void
free_reserve ()
{
  calls++;
  if (reserve != nullptr)
    {
      std::free (reserve);
      reserve = nullptr;
    }
  else
    std::set_new_handler (nullptr);
}

static void
uninstall_after_two ()
{
  if (++calls == 2)
    std::set_new_handler (nullptr);
}

static void
throw_int ()
{
  calls++;
  throw 7;
}

static const std::size_t MiB = (std::size_t) 1 << 20;

/* Limit the address space, take RESERVE_SIZE bytes (if any) as the
   reserve, and exhaust the rest.  */
static bool
setup (std::size_t reserve_size)
{
  calls = 0;
  if (!oom_limit (200 * MiB))
    return false;
  if (reserve_size != 0)
    {
      reserve = std::malloc (reserve_size);
      if (reserve == nullptr)
        return false;
    }
  oom_exhaust ();
  /* Nothing of a mapping's size is left.  */
  void *p = std::malloc (8 * MiB);
  std::free (p);
  return p == nullptr;
}

KT_TEST (oom_new_handler_frees_reserve)
{
  KT_CHECK (setup (96 * MiB));
  std::set_new_handler (free_reserve);
  char *p = new char[48 * MiB];
  KT_CHECK_EQ (calls, 1);
  KT_CHECK (kame_pool_malloc_usable_size (p) >= 48 * MiB);
  p[0] = 1;
  p[48 * MiB - 1] = 2;
  bool threw = false;
  try
    {
      char *q = new char[48 * MiB];
      delete[] q;
    }
  catch (const std::bad_alloc &)
    {
      threw = true;
    }
  KT_CHECK (threw);
  KT_CHECK_EQ (calls, 2);
  KT_CHECK (std::get_new_handler () == nullptr);
  delete[] p;
  oom_release ();
  char *r = new char[48 * MiB];
  KT_CHECK (kame_pool_malloc_usable_size (r) >= 48 * MiB);
  delete[] r;
}

KT_TEST (oom_new_handler_uninstalls)
{
  KT_CHECK (setup (0));
  std::set_new_handler (uninstall_after_two);
  bool threw = false;
  try
    {
      void *p = ::operator new (8 * MiB);
      ::operator delete (p);
    }
  catch (const std::bad_alloc &)
    {
      threw = true;
    }
  KT_CHECK (threw);
  KT_CHECK_EQ (calls, 2);
  oom_release ();
}

KT_TEST (oom_new_nothrow)
{
  KT_CHECK (setup (0));
  std::set_new_handler (nullptr);
  KT_CHECK (::operator new (8 * MiB, std::nothrow) == nullptr);
  KT_CHECK (::operator new[] (8 * MiB, std::nothrow) == nullptr);
  std::set_new_handler (uninstall_after_two);
  KT_CHECK (::operator new (8 * MiB, std::nothrow) == nullptr);
  KT_CHECK_EQ (calls, 2);
  oom_release ();
  void *p = ::operator new (8 * MiB, std::nothrow);
  KT_CHECK (p != nullptr);
  ::operator delete (p, std::nothrow);
}

KT_TEST (oom_new_aligned)
{
  KT_CHECK (setup (64 * MiB));
  std::align_val_t a = std::align_val_t (MiB);
  std::set_new_handler (nullptr);
  KT_CHECK (::operator new (8 * MiB, a, std::nothrow) == nullptr);
  KT_CHECK (::operator new[] (8 * MiB, a, std::nothrow) == nullptr);
  bool threw = false;
  try
    {
      void *p = ::operator new (8 * MiB, a);
      ::operator delete (p, a);
    }
  catch (const std::bad_alloc &)
    {
      threw = true;
    }
  KT_CHECK (threw);
  std::set_new_handler (free_reserve);
  void *p = ::operator new[] (16 * MiB, a);
  KT_CHECK_EQ (calls, 1);
  KT_CHECK ((reinterpret_cast<std::uintptr_t> (p) & (MiB - 1)) == 0);
  KT_CHECK (kame_pool_malloc_usable_size (p) >= 16 * MiB);
  ::operator delete[] (p, a);
  std::set_new_handler (nullptr);
  oom_release ();
}

KT_TEST (oom_new_nothrow_handler_throws)
{
  KT_CHECK (setup (0));
  std::set_new_handler (throw_int);
  KT_CHECK (::operator new (8 * MiB, std::nothrow) == nullptr);
  KT_CHECK_EQ (calls, 1);
  KT_CHECK (::operator new[] (8 * MiB, std::nothrow) == nullptr);
  KT_CHECK_EQ (calls, 2);
  KT_CHECK (::operator new (8 * MiB, std::align_val_t (4096), std::nothrow)
            == nullptr);
  KT_CHECK_EQ (calls, 3);
  std::set_new_handler (nullptr);
  oom_release ();
}

KT_MAIN (KT_CASE (oom_new_handler_frees_reserve),
         KT_CASE (oom_new_handler_uninstalls), KT_CASE (oom_new_nothrow),
         KT_CASE (oom_new_aligned), KT_CASE (oom_new_nothrow_handler_throws))
