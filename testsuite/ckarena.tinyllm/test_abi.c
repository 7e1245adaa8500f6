/* test_abi.c -- tests of the tinyllm runtime support layer: status
   names, the error slot, the allocation hooks, the interface version.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */
/* kptest-options: -pthread */
/* kptest-env: ASAN_OPTIONS=allocator_may_return_null=1 */

#include <limits.h>
#include <pthread.h>
#include <tinyllm/abi.h>
#include "kptest.h"
#include "counting_alloc.h"

KT_TEST (abi_version_matches_header)
{
  KT_CHECK_EQ (tl_abi_version (), TL_ABI_VERSION);
  KT_CHECK (TL_ABI_VERSION != 0);
}

KT_TEST (status_str_names_every_code)
{
  static const struct { int code; const char *name; } codes[] = {
    { TL_OK, "TL_OK" },
    { TL_EINVAL, "TL_EINVAL" },
    { TL_ENOMEM, "TL_ENOMEM" },
    { TL_ERANGE, "TL_ERANGE" },
    { TL_EIO, "TL_EIO" },
    { TL_EINTERNAL, "TL_EINTERNAL" },
  };
  size_t n = sizeof codes / sizeof codes[0];
  for (size_t i = 0; i < n; i++)
    {
      KT_CHECK_STR_EQ (tl_status_str (codes[i].code), codes[i].name);
      /* The values are ABI: 0 to n - 1, in declaration order.  */
      KT_CHECK_EQ (codes[i].code, i);
    }
  /* The strings are stable: the same pointer every time.  */
  KT_CHECK_PTR_EQ (tl_status_str (TL_ENOMEM), tl_status_str (TL_ENOMEM));
}

KT_TEST (status_str_unknown_codes)
{
  static const int bad[] = { -1, -2, INT_MIN, TL_EINTERNAL + 1, 100,
                             INT_MAX };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    KT_CHECK_STR_EQ (tl_status_str (bad[i]), "TL_UNKNOWN");
}

static void
set_from_stack (void)
{
  char msg[64];
  snprintf (msg, sizeof msg, "block %d failed", 7);
  tl_set_last_error ("%s", msg);
  memset (msg, 'Z', sizeof msg - 1);
}

static void *
other_thread (void *arg)
{
  const char **seen = arg;
  seen[0] = strdup (tl_last_error ());
  tl_set_last_error ("from the other thread");
  seen[1] = strdup (tl_last_error ());
  return NULL;
}

KT_TEST (error_slot_copies_and_truncates)
{
  KT_CHECK_STR_EQ (tl_last_error (), "");
  set_from_stack ();
  KT_CHECK_STR_EQ (tl_last_error (), "block 7 failed");

  tl_set_last_error ("n=%zu align=%d", (size_t) 5, 3);
  KT_CHECK_STR_EQ (tl_last_error (), "n=5 align=3");

  char big[3 * TL_LAST_ERROR_SIZE];
  for (size_t i = 0; i < sizeof big - 1; i++)
    big[i] = (char) ('a' + i % 26);
  big[sizeof big - 1] = '\0';
  tl_set_last_error ("%s", big);
  const char *e = tl_last_error ();
  KT_CHECK_EQ (strlen (e), TL_LAST_ERROR_SIZE - 1);
  KT_CHECK (memcmp (e, big, TL_LAST_ERROR_SIZE - 1) == 0);

  /* Each thread has its own slot.  */
  const char *seen[2] = { NULL, NULL };
  pthread_t t;
  KT_CHECK_EQ (pthread_create (&t, NULL, other_thread, seen), 0);
  KT_CHECK_EQ (pthread_join (t, NULL), 0);
  KT_CHECK_STR_EQ (seen[0], "");
  KT_CHECK_STR_EQ (seen[1], "from the other thread");
  free ((void *) seen[0]);
  free ((void *) seen[1]);
  KT_CHECK_EQ (strlen (tl_last_error ()), TL_LAST_ERROR_SIZE - 1);

  tl_clear_last_error ();
  KT_CHECK_STR_EQ (tl_last_error (), "");
  tl_set_last_error ("again");
  tl_set_last_error (NULL);
  KT_CHECK_STR_EQ (tl_last_error (), "");
}

KT_TEST (alloc_goes_through_the_hook)
{
  KT_CHECK (ca_install ());
  void *p = tl_alloc (100, 16);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (ca.alloc_calls, 1);
  KT_CHECK_EQ (ca.last_n, 100);
  KT_CHECK_EQ (ca.last_align, 16);
  KT_CHECK_EQ (ca.n_live, 1);
  KT_CHECK (ca_block_of (p) != NULL);
  memset (p, 0xab, 100);
  tl_free (p);
  KT_CHECK_EQ (ca.free_calls, 1);
  KT_CHECK_EQ (ca.alloc_calls, 1);

  tl_allocator got;
  KT_CHECK_EQ (tl_get_allocator (&got), TL_OK);
  KT_CHECK (got.alloc == ca_alloc);
  KT_CHECK (got.free == ca_free);
  KT_CHECK_PTR_EQ (got.ctx, &ca_ctx_tag);
  KT_CHECK_EQ (tl_get_allocator (NULL), TL_EINVAL);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (alloc_alignment_by_hand)
{
  /* The default hooks, then the counting ones: both must honor every
     power of two, including those below sizeof (void *).  */
  for (int pass = 0; pass < 2; pass++)
    {
      if (pass == 1)
        KT_CHECK (ca_install ());
      for (size_t a = 1; a <= ((size_t) 1 << 16); a *= 2)
        {
          size_t n = 3 * a / 2 + 1;
          unsigned char *p = tl_alloc (n, a);
          if (p == NULL)
            KT_FAILF ("tl_alloc (%zu, %zu): %s", n, a, tl_last_error ());
          if ((uintptr_t) p % a != 0)
            KT_FAILF ("tl_alloc (%zu, %zu) = %p", n, a, (void *) p);
          memset (p, 0x5a, n);
          tl_free (p);
        }
    }
  KT_CHECK_EQ (ca.alloc_calls, 17);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (set_allocator_null_restores_the_default)
{
  KT_CHECK (ca_install ());
  KT_CHECK_EQ (tl_set_allocator (NULL), TL_OK);
  void *p = tl_alloc (64, 64);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ ((uintptr_t) p % 64, 0);
  tl_free (p);
  KT_CHECK_EQ (ca.alloc_calls, 0);
  KT_CHECK_EQ (ca.free_calls, 0);
  tl_allocator got;
  KT_CHECK_EQ (tl_get_allocator (&got), TL_OK);
  KT_CHECK (got.alloc != ca_alloc);
  KT_CHECK (got.free != ca_free);
  KT_CHECK (got.alloc != NULL && got.free != NULL);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (set_allocator_rejects_half_a_hook)
{
  KT_CHECK (ca_install ());
  tl_allocator half[3] = {
    { ca_alloc, NULL, (void *) &ca_ctx_tag },
    { NULL, ca_free, (void *) &ca_ctx_tag },
    { NULL, NULL, NULL },
  };
  for (int i = 0; i < 3; i++)
    {
      tl_clear_last_error ();
      KT_CHECK_EQ (tl_set_allocator (&half[i]), TL_EINVAL);
      KT_CHECK (tl_last_error ()[0] != '\0');
      /* The counting hooks are still the ones in use.  */
      void *p = tl_alloc (8, 8);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ (ca.alloc_calls, (size_t) i + 1);
      tl_free (p);
      KT_CHECK_EQ (ca.free_calls, (size_t) i + 1);
    }
  CA_CHECK_NO_LEAK ();
}

/* Install the hooks from a struct that dies with this frame.  */
static __attribute__ ((noinline)) tl_status
install_from_stack (void)
{
  volatile tl_allocator h = { ca_alloc, ca_free, (void *) &ca_ctx_tag };
  tl_allocator copy = { h.alloc, h.free, h.ctx };
  tl_status s = tl_set_allocator (&copy);
  memset (&copy, 0, sizeof copy);
  return s;
}

static __attribute__ ((noinline)) void
scribble_stack (void)
{
  volatile unsigned char junk[512];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = 0xee;
}

KT_TEST (set_allocator_copies_the_struct)
{
  memset (&ca, 0, sizeof ca);
  ca.fail_at = ca.fail_from = SIZE_MAX;
  KT_CHECK_EQ (install_from_stack (), TL_OK);
  scribble_stack ();
  void *p = tl_alloc (32, 32);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (ca.alloc_calls, 1);
  tl_free (p);
  KT_CHECK_EQ (ca.free_calls, 1);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (alloc_rejects_zero_and_bad_alignment)
{
  KT_CHECK (ca_install ());
  static const struct { size_t n, align; } bad[] = {
    { 0, 8 }, { 0, 0 }, { 16, 0 }, { 16, 3 }, { 16, 48 }, { 16, 65 },
    { 16, SIZE_MAX }, { 16, ((size_t) 1 << 20) + 1 },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      tl_clear_last_error ();
      void *p = tl_alloc (bad[i].n, bad[i].align);
      if (p != NULL)
        KT_FAILF ("tl_alloc (%zu, %zu) succeeded", bad[i].n, bad[i].align);
      KT_CHECK (tl_last_error ()[0] != '\0');
    }
  KT_CHECK_EQ (ca.alloc_calls, 0);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (alloc_failure_sets_the_error)
{
  KT_CHECK (ca_install ());
  ca_fail_call (0);
  tl_clear_last_error ();
  KT_CHECK (tl_alloc (100, 8) == NULL);
  KT_CHECK_EQ (ca.alloc_calls, 1);
  KT_CHECK_EQ (ca.injected, 1);
  KT_CHECK (strstr (tl_last_error (), "100") != NULL);

  /* The next call succeeds again, and does not clear the slot.  */
  void *p = tl_alloc (100, 8);
  KT_CHECK (p != NULL);
  KT_CHECK (tl_last_error ()[0] != '\0');
  tl_free (p);

  /* The default hooks fail too, for a size no machine has.  */
  KT_CHECK_EQ (tl_set_allocator (NULL), TL_OK);
  tl_clear_last_error ();
  KT_CHECK (tl_alloc (SIZE_MAX - 4096, 64) == NULL);
  KT_CHECK (tl_last_error ()[0] != '\0');
  CA_CHECK_NO_LEAK ();
}

KT_TEST (free_null_is_a_no_op)
{
  KT_CHECK (ca_install ());
  tl_free (NULL);
  KT_CHECK_EQ (ca.free_calls, 0);
  KT_CHECK_EQ (ca.misuse, 0);
  KT_CHECK_EQ (tl_set_allocator (NULL), TL_OK);
  tl_free (NULL);
  CA_CHECK_NO_LEAK ();
}

KT_MAIN (KT_CASE (abi_version_matches_header),
         KT_CASE (status_str_names_every_code),
         KT_CASE (status_str_unknown_codes),
         KT_CASE (error_slot_copies_and_truncates),
         KT_CASE (alloc_goes_through_the_hook),
         KT_CASE (alloc_alignment_by_hand),
         KT_CASE (set_allocator_null_restores_the_default),
         KT_CASE (set_allocator_rejects_half_a_hook),
         KT_CASE (set_allocator_copies_the_struct),
         KT_CASE (alloc_rejects_zero_and_bad_alignment),
         KT_CASE (alloc_failure_sets_the_error),
         KT_CASE (free_null_is_a_no_op))
