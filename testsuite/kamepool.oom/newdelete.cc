/* newdelete.cc -- kamepool.oom tests of the pool's C++ operator new
   and operator delete: every replaceable form is served by the pool
   with the alignment asked for, the new_handler loop runs exactly as
   the standard says for requests that can never succeed, the nothrow
   forms return nullptr whatever the handler does, and a C++ program
   that is not linked with the pool gets the pool's operator new when
   the library is in LD_PRELOAD.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */
/* kptest-libs: -lkamepool-cxx */

#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <initializer_list>
#include <new>

#include "kame_pool.h"
#include "kptest.h"

/* Too big for any allocator; the operator cannot be inlined away with
   a volatile size.  */
static volatile std::size_t impossible = SIZE_MAX / 2;

static int handler_calls;

static void
counting_handler ()
{
  handler_calls++;
  if (handler_calls == 3)
    std::set_new_handler (nullptr);
}

static void
throwing_handler ()
{
  handler_calls++;
  throw 42;
}

/* P is a pool block of at least N bytes aligned to A.  */
static bool
pool_block (const void *p, std::size_t n, std::size_t a)
{
  if (p == nullptr)
    return false;
  std::size_t usable = kame_pool_malloc_usable_size (p);
  if (usable < n || (reinterpret_cast<std::uintptr_t> (p) & (a - 1)) != 0)
    {
      printf ("%p: usable %zu for %zu bytes aligned to %zu\n", p, usable, n,
              a);
      return false;
    }
  return true;
}

KT_TEST (cxx_new_forms)
{
  static const std::size_t sizes[] = { 0, 1, 24, 4096, 40000, 300000,
                                       5u << 20 };
  for (std::size_t n : sizes)
    {
      void *p = ::operator new (n);
      void *q = ::operator new[] (n);
      void *r = ::operator new (n, std::nothrow);
      void *s = ::operator new[] (n, std::nothrow);
      KT_CHECK (pool_block (p, n, 16));
      KT_CHECK (pool_block (q, n, 16));
      KT_CHECK (pool_block (r, n, 16));
      KT_CHECK (pool_block (s, n, 16));
      ::operator delete (p, n);
      ::operator delete[] (q, n);
      ::operator delete (r, std::nothrow);
      ::operator delete[] (s);
    }
  int *i = new int (7);
  KT_CHECK (pool_block (i, sizeof *i, alignof (int)));
  KT_CHECK_EQ (*i, 7);
  delete i;
}

KT_TEST (cxx_new_aligned_forms)
{
  for (std::size_t a = 32; a <= ((std::size_t) 64 << 20); a <<= 1)
    for (std::size_t n : { (std::size_t) 1, a - 1, a, a + 1 })
      {
        std::align_val_t al = static_cast<std::align_val_t> (a);
        void *p = ::operator new (n, al);
        void *q = ::operator new[] (n, al, std::nothrow);
        KT_CHECK (pool_block (p, n, a));
        KT_CHECK (pool_block (q, n, a));
        ::operator delete (p, n, al);
        ::operator delete[] (q, al, std::nothrow);
        p = ::operator new[] (n, al);
        q = ::operator new (n, al, std::nothrow);
        KT_CHECK (pool_block (p, n, a));
        KT_CHECK (pool_block (q, n, a));
        ::operator delete[] (p, n, al);
        ::operator delete (q, al);
      }
  struct alignas (256) wide { char c[300]; };
  wide *w = new wide[3];
  KT_CHECK (pool_block (w, sizeof (wide) * 3, 256));
  delete[] w;
}

/* A handler that uninstalls itself on its third call: new calls it
   three times, then throws std::bad_alloc.  */
KT_TEST (cxx_new_handler_uninstalls)
{
  handler_calls = 0;
  std::set_new_handler (counting_handler);
  bool threw = false;
  try
    {
      void *p = ::operator new (impossible);
      ::operator delete (p);
    }
  catch (const std::bad_alloc &)
    {
      threw = true;
    }
  KT_CHECK (threw);
  KT_CHECK_EQ (handler_calls, 3);
  KT_CHECK (std::get_new_handler () == nullptr);
}

KT_TEST (cxx_new_no_handler_throws)
{
  std::set_new_handler (nullptr);
  int threw = 0;
  try
    {
      void *p = ::operator new[] (impossible);
      ::operator delete[] (p);
    }
  catch (const std::bad_alloc &)
    {
      threw++;
    }
  try
    {
      void *p = ::operator new (impossible, std::align_val_t (64));
      ::operator delete (p, std::align_val_t (64));
    }
  catch (const std::bad_alloc &)
    {
      threw++;
    }
  /* An alignment that is not a power of two cannot be met.  */
  try
    {
      void *p = ::operator new (64, std::align_val_t (48));
      ::operator delete (p, std::align_val_t (48));
    }
  catch (const std::bad_alloc &)
    {
      threw++;
    }
  KT_CHECK_EQ (threw, 3);
}

/* The nothrow forms return nullptr when the handler throws, after
   exactly one call of it, and when there is no handler.  */
KT_TEST (cxx_nothrow_handler_throws)
{
  handler_calls = 0;
  std::set_new_handler (throwing_handler);
  KT_CHECK (::operator new (impossible, std::nothrow) == nullptr);
  KT_CHECK_EQ (handler_calls, 1);
  KT_CHECK (::operator new[] (impossible, std::nothrow) == nullptr);
  KT_CHECK_EQ (handler_calls, 2);
  KT_CHECK (::operator new (impossible, std::align_val_t (4096),
                            std::nothrow) == nullptr);
  KT_CHECK_EQ (handler_calls, 3);
  std::set_new_handler (nullptr);
  KT_CHECK (::operator new[] (impossible, std::align_val_t (64),
                              std::nothrow) == nullptr);
  KT_CHECK_EQ (handler_calls, 3);
  /* The throwing form lets the handler's exception through.  */
  std::set_new_handler (throwing_handler);
  int caught = 0;
  try
    {
      void *p = ::operator new (impossible);
      ::operator delete (p);
    }
  catch (int v)
    {
      caught = v;
    }
  KT_CHECK_EQ (caught, 42);
  KT_CHECK_EQ (handler_calls, 4);
  std::set_new_handler (nullptr);
}

/* A C++ program built without the pool, run with libkamepool-cxx and
   libkamepool in LD_PRELOAD, must get the pool's operator new (the
   operators must be unversioned, as malloc) and pool memory from it.
   Run with libkamepool alone, it still gets pool memory, through
   libstdc++'s operator new and our malloc.  The same program without
   LD_PRELOAD is the control.  */
static const char helper_source[] =
  "#include <cstdio>\n"
  "#include <cstring>\n"
  "#include <dlfcn.h>\n"
  "#include <new>\n"
  "typedef unsigned long (*usable_fn) (const void *);\n"
  "int main () {\n"
  "  usable_fn f = (usable_fn) dlsym (RTLD_DEFAULT,\n"
  "                                   \"kame_pool_malloc_usable_size\");\n"
  "  if (f == nullptr) { std::puts (\"no pool\"); return 0; }\n"
  "  Dl_info info;\n"
  "  void *op = dlsym (RTLD_DEFAULT, \"_Znwm\");\n"
  "  bool ours = op != nullptr && dladdr (op, &info) != 0\n"
  "              && std::strstr (info.dli_fname, \"libkamepool-cxx\");\n"
  "  int *a = new int (1);\n"
  "  long *b = new long[1000];\n"
  "  void *c = ::operator new (100, std::align_val_t (8192));\n"
  "  void *d = ::operator new (100, std::nothrow);\n"
  "  std::printf (\"%d %d %d %d %s\\n\", f (a) != 0, f (b) != 0,\n"
  "               f (c) != 0, f (d) != 0, ours ? \"ours\" : \"libstdc++\");\n"
  "  delete a; delete[] b;\n"
  "  ::operator delete (c, std::align_val_t (8192));\n"
  "  ::operator delete (d);\n"
  "  return 0;\n"
  "}\n";

static bool
shell_output (const char *cmd, char *out, std::size_t size)
{
  FILE *f = popen (cmd, "r");
  if (f == nullptr)
    return false;
  std::size_t n = fread (out, 1, size - 1, f);
  out[n] = '\0';
  return pclose (f) == 0;
}

KT_TEST (cxx_new_preloaded)
{
  Dl_info pool, cxx;
  KT_CHECK (dladdr (reinterpret_cast<void *> (kame_pool_malloc), &pool) != 0);
  KT_CHECK (pool.dli_fname != nullptr && pool.dli_fname[0] == '/');
  void *(*op) (std::size_t) = ::operator new;
  KT_CHECK (dladdr (reinterpret_cast<void *> (op), &cxx) != 0);
  KT_CHECK (cxx.dli_fname != nullptr
            && std::strstr (cxx.dli_fname, "libkamepool-cxx") != nullptr);
  if (system ("command -v g++ >/dev/null 2>&1") != 0)
    KT_UNSUPPORTED ("no g++ to build the helper");
  char dir[] = "/tmp/kptest-cxxnew-XXXXXX";
  KT_CHECK (mkdtemp (dir) != nullptr);
  char path[256], cmd[8192], out[256];
  snprintf (path, sizeof path, "%s/helper.cc", dir);
  FILE *f = fopen (path, "w");
  KT_CHECK (f != nullptr);
  fputs (helper_source, f);
  KT_CHECK (fclose (f) == 0);
  snprintf (cmd, sizeof cmd,
            "g++ -std=gnu++17 -O2 -o %s/helper %s -ldl 2>&1", dir, path);
  bool built = shell_output (cmd, out, sizeof out);
  if (!built)
    printf ("%s\n", out);
  snprintf (cmd, sizeof cmd, "env -u LD_PRELOAD %s/helper", dir);
  bool plain = shell_output (cmd, out, sizeof out);
  char plain_out[256], pool_out[256];
  snprintf (plain_out, sizeof plain_out, "%s", out);
  snprintf (cmd, sizeof cmd, "env LD_PRELOAD=%s %s/helper", pool.dli_fname,
            dir);
  bool pool_only = shell_output (cmd, out, sizeof out);
  snprintf (pool_out, sizeof pool_out, "%s", out);
  snprintf (cmd, sizeof cmd, "env LD_PRELOAD='%s %s' %s/helper",
            cxx.dli_fname, pool.dli_fname, dir);
  bool both = shell_output (cmd, out, sizeof out);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_CHECK (system (cmd) == 0);
  KT_CHECK (built);
  KT_CHECK (plain);
  KT_CHECK_STR_EQ (plain_out, "no pool\n");
  KT_CHECK (pool_only);
  KT_CHECK_STR_EQ (pool_out, "1 1 1 1 libstdc++\n");
  KT_CHECK (both);
  KT_CHECK_STR_EQ (out, "1 1 1 1 ours\n");
}

KT_MAIN (KT_CASE (cxx_new_forms), KT_CASE (cxx_new_aligned_forms),
         KT_CASE (cxx_new_handler_uninstalls),
         KT_CASE (cxx_new_no_handler_throws),
         KT_CASE (cxx_nothrow_handler_throws), KT_CASE (cxx_new_preloaded))
