/* new.cc -- libkamepool-cxx: the replaceable C++ operator new and
   operator delete, all of their forms, served by the pool.  Built when
   configure --enable-cxx (the default) and the malloc family is
   interposed: the address and thread sanitizers own operator new as
   they own malloc.

   It is a library of its own, linked with -lkamepool-cxx or preloaded
   next to libkamepool.so, because it needs libstdc++ (for
   std::get_new_handler and std::bad_alloc): in libkamepool itself,
   every C program that preloads the pool would map libstdc++ and its
   dependencies, about 2 MiB of resident memory.  A C++ program that
   uses libkamepool alone still gets pool memory from new, through
   libstdc++'s operator new, which calls malloc.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Only the throwing forms throw, and only std::bad_alloc or whatever a
   new_handler throws; the C calls they use never throw, and no
   exception ever leaves through the C API.  The operators are exported
   with no symbol version, like malloc (see libkamepool.map): programs
   refer to them as _Znwm@GLIBCXX_3.4, and the dynamic linker binds such
   a reference to an interposer only when its definition has the base
   version.  */

#include <config.h>

#include <cstddef>
#include <new>

#include "kame_pool.h"

#define KP_CXX_EXPORT __attribute__ ((__visibility__ ("default")))

namespace
{
  inline bool
  power_of_two (std::size_t a)
  {
    return a != 0 && (a & (a - 1)) == 0;
  }

  /* One attempt at N bytes aligned to ALIGN (0: the default).  */
  inline void *
  try_alloc (std::size_t n, std::size_t align) noexcept
  {
    return align == 0 ? kame_pool_malloc (n) : kame_pool_aligned_alloc (align, n);
  }

  /* The new_handler loop of [new.delete.single]: retry after every call
     of the handler, throw std::bad_alloc when there is none.  */
  void *
  alloc_or_throw (std::size_t n, std::size_t align)
  {
    /* An alignment that is not a power of two breaks the operator's
       precondition; no handler can help it.  */
    if (align != 0 && !power_of_two (align))
      throw std::bad_alloc ();
    for (;;)
      {
        void *p = try_alloc (n, align);
        if (p != nullptr)
          return p;
        std::new_handler h = std::get_new_handler ();
        if (h == nullptr)
          throw std::bad_alloc ();
        h ();
      }
  }

  /* The nothrow forms: the same loop, and nullptr whatever the handler
     throws.  */
  void *
  alloc_or_null (std::size_t n, std::size_t align) noexcept
  {
    try
      {
        return alloc_or_throw (n, align);
      }
    catch (...)
      {
        return nullptr;
      }
  }
}

KP_CXX_EXPORT void *
operator new (std::size_t n)
{
  void *p = kame_pool_malloc (n);
  if (__builtin_expect (p != nullptr, 1))
    return p;
  return alloc_or_throw (n, 0);
}

KP_CXX_EXPORT void *
operator new[] (std::size_t n)
{
  void *p = kame_pool_malloc (n);
  if (__builtin_expect (p != nullptr, 1))
    return p;
  return alloc_or_throw (n, 0);
}

KP_CXX_EXPORT void *
operator new (std::size_t n, const std::nothrow_t &) noexcept
{
  void *p = kame_pool_malloc (n);
  if (__builtin_expect (p != nullptr, 1))
    return p;
  return alloc_or_null (n, 0);
}

KP_CXX_EXPORT void *
operator new[] (std::size_t n, const std::nothrow_t &) noexcept
{
  void *p = kame_pool_malloc (n);
  if (__builtin_expect (p != nullptr, 1))
    return p;
  return alloc_or_null (n, 0);
}

KP_CXX_EXPORT void *
operator new (std::size_t n, std::align_val_t a)
{
  return alloc_or_throw (n, static_cast<std::size_t> (a));
}

KP_CXX_EXPORT void *
operator new[] (std::size_t n, std::align_val_t a)
{
  return alloc_or_throw (n, static_cast<std::size_t> (a));
}

KP_CXX_EXPORT void *
operator new (std::size_t n, std::align_val_t a,
              const std::nothrow_t &) noexcept
{
  return alloc_or_null (n, static_cast<std::size_t> (a));
}

KP_CXX_EXPORT void *
operator new[] (std::size_t n, std::align_val_t a,
                const std::nothrow_t &) noexcept
{
  return alloc_or_null (n, static_cast<std::size_t> (a));
}

/* Every delete is a free: the pool finds a block's size and alignment
   from its address, so the size and alignment arguments are not
   needed.  */

KP_CXX_EXPORT void
operator delete (void *p) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete (void *p, const std::nothrow_t &) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p, const std::nothrow_t &) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete (void *p, std::size_t) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p, std::size_t) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete (void *p, std::align_val_t) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p, std::align_val_t) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete (void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p, std::align_val_t,
                   const std::nothrow_t &) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete (void *p, std::size_t, std::align_val_t) noexcept
{
  kame_pool_free (p);
}

KP_CXX_EXPORT void
operator delete[] (void *p, std::size_t, std::align_val_t) noexcept
{
  kame_pool_free (p);
}
