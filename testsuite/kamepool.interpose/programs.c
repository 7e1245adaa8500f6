/* programs.c -- kamepool.interpose tests that run other programs with
   the built libkamepool.so in LD_PRELOAD: python3, perl, sort and gcc
   must print exactly what they print without it, and a helper compiled
   here (not linked with the pool) must see every call of the malloc
   family served by the pool, and glibc's mallinfo2 and malloc_trim
   answered by it.  A program that is not installed makes its
   test UNSUPPORTED.

   The library's path comes from dladdr on kame_pool_malloc: this
   program is linked against the built library (with an rpath to it).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */

#define _GNU_SOURCE 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kame_pool.h"
#include "kptest.h"
#define KT_WORKDIR_TEMPLATE "/tmp/kptest-interpose-XXXXXX"
#include "kptest-programs.h"

/* Read the whole file PATH into a fresh buffer (its length in *LEN).  */
static char *
slurp (const char *path, size_t *len)
{
  FILE *f = fopen (path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc (cap + 1);
  size_t r;
  while (buf != NULL && (r = fread (buf + n, 1, cap - n, f)) > 0)
    {
      n += r;
      if (n == cap)
        {
          cap *= 2;
          char *nb = realloc (buf, cap + 1);
          if (nb == NULL)
            free (buf);
          buf = nb;
        }
    }
  fclose (f);
  if (buf != NULL)
    buf[n] = '\0';
  *len = n;
  return buf;
}

struct run
{
  int status;
  char *out, *err;
  size_t out_len, err_len;
};

/* Run ARGV with the environment of this process minus LD_PRELOAD,
   LD_DEBUG* and KAME_POOL_*, plus (when PRELOAD) the library in
   LD_PRELOAD, KAME_POOL_STATS=1, and the dynamic linker's log of
   initialisers in WORKDIR/ld.PID; stdin from IN (or /dev/null).  */
static bool
run (char *const argv[], bool preload, const char *in, struct run *r)
{
  static int serial;
  char out[512], err[512];
  snprintf (out, sizeof out, "%s/out.%d", workdir, serial);
  snprintf (err, sizeof err, "%s/err.%d", workdir, serial++);

  static const char *const drop[] = { "LD_PRELOAD=", "LD_DEBUG",
                                      "KAME_POOL_", NULL };
  size_t k;
  char **env = env_without (drop, 4, &k);
  if (env == NULL)
    return false;
  char preload_var[4200], debug_output[600];
  snprintf (preload_var, sizeof preload_var, "LD_PRELOAD=%s", library);
  snprintf (debug_output, sizeof debug_output, "LD_DEBUG_OUTPUT=%s/ld",
            workdir);
  if (preload)
    {
      env[k++] = preload_var;
      env[k++] = "KAME_POOL_STATS=1";
      env[k++] = "LD_DEBUG=files";
      env[k++] = debug_output;
    }
  env[k] = NULL;

  fflush (stdout);
  pid_t pid = fork ();
  if (pid < 0)
    {
      free (env);
      return false;
    }
  if (pid == 0)
    {
      int fi = open (in != NULL ? in : "/dev/null", O_RDONLY);
      int fo = open (out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int fe = open (err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fi < 0 || fo < 0 || fe < 0)
        _exit (126);
      dup2 (fi, 0);
      dup2 (fo, 1);
      dup2 (fe, 2);
      execve (argv[0], argv, env);
      _exit (127);
    }
  free (env);
  while (waitpid (pid, &r->status, 0) < 0)
    if (errno != EINTR)
      return false;
  r->out = slurp (out, &r->out_len);
  r->err = slurp (err, &r->err_len);
  return r->out != NULL && r->err != NULL;
}

static void
run_free (struct run *r)
{
  free (r->out);
  free (r->err);
}

/* How many processes the dynamic linker logged in WORKDIR/ld.*, and in
   how many of them it ran the library's initialiser; the logs are
   removed.  */
static void
count_pool_processes (int *processes, int *with_pool)
{
  char needle[4200], path[1024];
  snprintf (needle, sizeof needle, "calling init: %s", library);
  *processes = *with_pool = 0;
  DIR *d = opendir (workdir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    if (strncmp (e->d_name, "ld.", 3) == 0)
      {
        size_t len;
        snprintf (path, sizeof path, "%s/%s", workdir, e->d_name);
        char *log = slurp (path, &len);
        ++*processes;
        *with_pool += log != NULL && strstr (log, needle) != NULL;
        free (log);
        unlink (path);
      }
  closedir (d);
}

/* Run ARGV without and with the pool preloaded: both succeed and print
   the same bytes, and every process of the preloaded run loaded the
   pool.  */
static bool
same_with_and_without_pool (char *const argv[], const char *in)
{
  struct run plain, pooled;
  if (!run (argv, false, in, &plain))
    return false;
  if (!run (argv, true, in, &pooled))
    {
      run_free (&plain);
      return false;
    }
  bool ok = true;
  if (!WIFEXITED (plain.status) || WEXITSTATUS (plain.status) != 0
      || !WIFEXITED (pooled.status) || WEXITSTATUS (pooled.status) != 0)
    {
      printf ("%s: status %#x without the pool, %#x with it; stderr: "
              "%.500s\n", argv[0], (unsigned) plain.status,
              (unsigned) pooled.status, pooled.err);
      ok = false;
    }
  else if (plain.out_len == 0)
    {
      printf ("%s printed nothing\n", argv[0]);
      ok = false;
    }
  else if (plain.out_len != pooled.out_len
           || memcmp (plain.out, pooled.out, plain.out_len) != 0)
    {
      printf ("%s: %zu bytes of output without the pool, %zu with it, "
              "and they differ\n", argv[0], plain.out_len, pooled.out_len);
      ok = false;
    }
  int processes, with_pool;
  count_pool_processes (&processes, &with_pool);
  if (ok && (processes == 0 || with_pool != processes))
    {
      printf ("%s: the pool was initialised in %d of %d processes\n",
              argv[0], with_pool, processes);
      ok = false;
    }
  run_free (&plain);
  run_free (&pooled);
  return ok;
}

static bool
write_file (const char *path, const char *text)
{
  FILE *f = fopen (path, "w");
  if (f == NULL)
    return false;
  bool ok = fputs (text, f) >= 0;
  return fclose (f) == 0 && ok;
}

KT_TEST (python3_output_is_identical_under_the_pool)
{
  NEED_PROGRAM (python, "python3");
  KT_CHECK (setup ());
  char *argv[] = {
    python, "-c",
    "import json, hashlib, collections\n"
    "d = {str(i): [i * j for j in range(i % 50)] for i in range(20000)}\n"
    "s = json.dumps(d, sort_keys=True)\n"
    "c = collections.Counter(s)\n"
    "big = bytearray(3 << 20)\n"
    "for i in range(0, len(big), 4093): big[i] = i & 255\n"
    "print(len(s), hashlib.sha256(s.encode()).hexdigest())\n"
    "print(sorted(c.items())[:20])\n"
    "print(hashlib.sha256(bytes(big)).hexdigest())\n"
    "print(''.join(sorted(set('the quick brown fox' * 1000))))\n",
    NULL
  };
  bool ok = same_with_and_without_pool (argv, NULL);
  remove_workdir ();
  KT_CHECK (ok);
}

KT_TEST (perl_output_is_identical_under_the_pool)
{
  NEED_PROGRAM (perl, "perl");
  KT_CHECK (setup ());
  char *argv[] = {
    perl, "-e",
    "my %h; for my $i (1..50000) { $h{\"k$i\"} = 'v' x ($i % 300); }\n"
    "my $t = 0; $t += length $h{$_} for keys %h; print \"$t\\n\";\n"
    "my @a = sort { $a <=> $b } map { ($_ * 7919) % 100003 } 1..100000;\n"
    "print \"@a[0..20]\\n\";\n"
    "my $s = join ',', @a; print length($s), \"\\n\";\n"
    "my $big = 'x' x (5 << 20); substr($big, 12345, 3) = 'abc';\n"
    "print index($big, 'abc'), \"\\n\";\n",
    NULL
  };
  bool ok = same_with_and_without_pool (argv, NULL);
  remove_workdir ();
  KT_CHECK (ok);
}

KT_TEST (sort_output_is_identical_under_the_pool)
{
  NEED_PROGRAM (sort, "sort");
  KT_CHECK (setup ());
  char input[512];
  snprintf (input, sizeof input, "%s/lines", workdir);
  KT_CHECK (write_sort_input (input, 200000));
  char key[] = "-k2,2n";
  char buffer[] = "-S1M";
  char *argv[] = { sort, buffer, key, NULL };
  bool ok = same_with_and_without_pool (argv, input);
  remove_workdir ();
  KT_CHECK (ok);
}

KT_TEST (gcc_compiles_identically_under_the_pool)
{
  NEED_PROGRAM (gcc, "gcc");
  KT_CHECK (setup ());
  char src[512];
  snprintf (src, sizeof src, "%s/unit.c", workdir);
  KT_CHECK (write_file (src,
                        "#include <stdio.h>\n"
                        "#include <stdlib.h>\n"
                        "struct node { struct node *next; int v; };\n"
                        "static int sum (struct node *n)\n"
                        "{ int s = 0; for (; n; n = n->next) s += n->v;"
                        " return s; }\n"
                        "int main (void)\n"
                        "{\n"
                        "  struct node *h = NULL;\n"
                        "  for (int i = 0; i < 100; i++)\n"
                        "    { struct node *n = malloc (sizeof *n);\n"
                        "      if (!n) return 1; n->next = h; n->v = i;"
                        " h = n; }\n"
                        "  printf (\"%d\\n\", sum (h));\n"
                        "  return 0;\n"
                        "}\n"));
  char o2[] = "-O2", dash_s[] = "-S", dash_o[] = "-o", out[] = "-";
  char *argv[] = { gcc, o2, dash_s, dash_o, out, src, NULL };
  bool ok = same_with_and_without_pool (argv, NULL);
  remove_workdir ();
  KT_CHECK (ok);
}

/* The helper is built here without the pool, so only LD_PRELOAD can
   bring it in.  It prints "no pool" when the pool is absent, else one
   line per call saying whether the pool served it, and exercises the
   __libc_malloc pointers with free and realloc.  */
static const char helper_source[] =
  "#define _GNU_SOURCE 1\n"
  "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n"
  "#include <dlfcn.h>\n"
  "#include <malloc.h>\n"
  "#include <stdio.h>\n"
  "#include <stdlib.h>\n"
  "#include <string.h>\n"
  "extern void *__libc_malloc (size_t);\n"
  "int main (void)\n"
  "{\n"
  "  size_t (*pool_usable) (const void *)\n"
  "    = (size_t (*) (const void *))\n"
  "      dlsym (RTLD_DEFAULT, \"kame_pool_malloc_usable_size\");\n"
  "  if (pool_usable == NULL)\n"
  "    { puts (\"no pool\"); return 0; }\n"
  "  static const size_t sizes[] = { 0, 1, 200, 5000, 100000, 6000000 };\n"
  "  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)\n"
  "    {\n"
  "      size_t n = sizes[i];\n"
  "      void *p[9];\n"
  "      p[0] = malloc (n);\n"
  "      p[1] = calloc (1, n);\n"
  "      p[2] = realloc (NULL, n);\n"
  "      p[3] = reallocarray (NULL, 1, n);\n"
  "      p[4] = aligned_alloc (64, n);\n"
  "      p[5] = memalign (128, n);\n"
  "      p[6] = valloc (n);\n"
  "      p[7] = pvalloc (n);\n"
  "      if (posix_memalign (&p[8], 256, n) != 0) p[8] = NULL;\n"
  "      for (int k = 0; k < 9; k++)\n"
  "        {\n"
  "          printf (\"%zu %d %s\\n\", n, k,\n"
  "                  p[k] != NULL && pool_usable (p[k]) != 0\n"
  "                  && malloc_usable_size (p[k]) == pool_usable (p[k])\n"
  "                  ? \"pool\" : \"NOT POOL\");\n"
  "          free (p[k]);\n"
  "        }\n"
  "    }\n"
  "  char *s = strdup (\"dup\");\n"
  "  printf (\"strdup %s\\n\", pool_usable (s) ? \"pool\" : \"NOT POOL\");\n"
  "  free (s);\n"
  "  for (size_t n = 1; n < 1000000; n *= 7)\n"
  "    {\n"
  "      char *q = __libc_malloc (n);\n"
  "      if (q == NULL || pool_usable (q) != 0)\n"
  "        { puts (\"libc bad\"); return 1; }\n"
  "      memset (q, 'z', n);\n"
  "      q = realloc (q, n + 10000);\n"
  "      if (q == NULL || q[n - 1] != 'z')\n"
  "        { puts (\"libc realloc bad\"); return 1; }\n"
  "      free (q);\n"
  "      free (__libc_malloc (n));\n"
  "    }\n"
  "  puts (\"libc mix ok\");\n"
  "  void *big = malloc (6000000);\n"
  "  struct mallinfo2 m = mallinfo2 ();\n"
  "  printf (\"mallinfo2 %s\\n\", m.hblks == 1 && m.hblkhd > 6000000\n"
  "          && m.uordblks > 6000000 ? \"pool\" : \"NOT POOL\");\n"
  "  struct mallinfo mi = mallinfo ();\n"
  "  printf (\"mallinfo %s\\n\", mi.hblks == 1 && mi.hblkhd > 6000000\n"
  "          ? \"pool\" : \"NOT POOL\");\n"
  "  char *xml = NULL;\n"
  "  size_t xlen = 0;\n"
  "  FILE *x = open_memstream (&xml, &xlen);\n"
  "  int ri = x != NULL ? malloc_info (0, x) : -1;\n"
  "  if (x != NULL) fclose (x);\n"
  "  printf (\"malloc_info %s\\n\", ri == 0 && xml != NULL\n"
  "          && strstr (xml, \"<total type=\\\"cache\\\"\") != NULL\n"
  "          ? \"pool\" : \"NOT POOL\");\n"
  "  free (xml);\n"
  "  malloc_stats ();\n"
  "  free (big);\n"
  "  printf (\"malloc_trim %d\\n\", malloc_trim (0));\n"
  "  /* glibc answers 1 to both; the pool does not perturb.  */\n"
  "  printf (\"mallopt %d %d\\n\", mallopt (M_PERTURB, 1),\n"
  "          mallopt (M_ARENA_MAX, 2));\n"
  "  return 0;\n"
  "}\n";

KT_TEST (preloaded_pool_serves_the_whole_malloc_family)
{
  NEED_PROGRAM (cc, "gcc");
  KT_CHECK (setup ());
  char src[512], exe[512];
  snprintf (src, sizeof src, "%s/helper.c", workdir);
  snprintf (exe, sizeof exe, "%s/helper", workdir);
  KT_CHECK (write_file (src, helper_source));
  char dash_o[] = "-o", wall[] = "-Wall", ldl[] = "-ldl";
  char *build[] = { cc, wall, dash_o, exe, src, ldl, NULL };
  struct run b;
  KT_CHECK (run (build, false, NULL, &b));
  if (!WIFEXITED (b.status) || WEXITSTATUS (b.status) != 0 || b.err_len)
    KT_FAILF ("building the helper failed: %.300s", b.err);
  run_free (&b);

  char *argv[] = { exe, NULL };
  struct run plain, pooled;
  KT_CHECK (run (argv, false, NULL, &plain));
  KT_CHECK (run (argv, true, NULL, &pooled));
  remove_workdir ();
  KT_CHECK_EQ (WIFEXITED (plain.status) ? WEXITSTATUS (plain.status) : 99, 0);
  KT_CHECK_STR_EQ (plain.out, "no pool\n");
  if (!WIFEXITED (pooled.status) || WEXITSTATUS (pooled.status) != 0)
    KT_FAILF ("helper under the pool: status %#x, stderr %.300s",
              (unsigned) pooled.status, pooled.err);
  if (strstr (pooled.out, "NOT POOL") != NULL)
    KT_FAILF ("some calls bypassed the pool:\n%.400s", pooled.out);
  /* 6 sizes x 9 calls, strdup, the libc mix, and glibc's extensions
     (mallopt's answer to M_PERTURB is the pool's: 0),
     which must be the pool's: they see the pool's one live mapping
     (glibc's own heap served nothing), malloc_info has the pool's
     cache element, and once freed the 6 MB block waits in the pool's
     cache, which the trim gives back.  */
  int lines = 0;
  for (const char *c = pooled.out; *c != '\0'; c++)
    lines += *c == '\n';
  KT_CHECK_EQ (lines, 6 * 9 + 7);
  KT_CHECK (strstr (pooled.out, "libc mix ok\nmallinfo2 pool\n"
                    "mallinfo pool\nmalloc_info pool\nmalloc_trim 1\n"
                    "mallopt 0 1\n")
            != NULL);
  KT_CHECK (strstr (pooled.err, "Arena 0:\nsystem bytes     = ") != NULL);
  KT_CHECK (strstr (pooled.err, "\nmax mmap regions =          1\n"
                                "max mmap bytes   = ") != NULL);
  run_free (&plain);
  run_free (&pooled);
}

KT_MAIN (KT_CASE (python3_output_is_identical_under_the_pool),
         KT_CASE (perl_output_is_identical_under_the_pool),
         KT_CASE (sort_output_is_identical_under_the_pool),
         KT_CASE (gcc_compiles_identically_under_the_pool),
         KT_CASE (preloaded_pool_serves_the_whole_malloc_family))
