/* claim.pml: Spin model of the unit claim protocol of one region
   bitmap word: chunks of 1, 2 and 4 units claimed at stride-aligned
   positions, back-offsets, lookup, release, and claim again.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Mirrors lib/kamepool/region.c:
     kp_units_claim    load claim[w] relaxed; pick a free stride-aligned
                       run; CAS acquire (failure relaxed) setting the
                       run's bits; only after winning, store
                       back[base + i] = i relaxed; then the descriptor
                       fields and kind (relaxed).
     kp_units_release  kind and back[] reset to 0 relaxed, then
                       atomic_fetch_and release clearing the claim bits
                       (the recyclability point).
     lookup (kp_free)  unit u -> desc[u - back[u]], back[u] relaxed.
   Spin explores sequentially consistent interleavings only; the C11
   orders above are what makes the C code behave like this model, see
   doc/kamepool-model.md.

   Invariants:
     INV1  no unit belongs to two live chunks (checked when a claim CAS
           wins: every unit of the run must be free in the ghost map).
     INV2  the back-offset of every unit of a published chunk leads to
           the chunk that claimed it (checked in every state by the
           monitor, and on every resolution by the lookup process).

   Build switches (the test driver passes them with spin -D):
     UNFIXED             store the back-offsets before the CAS, as the
                         original code did (claim-unfixed.pml).
     RELEASE_CLEAR_FIRST clear the claim bits before resetting the
                         metadata, a mutant that must also fail.
     TWO_STRIDES         run only the 2-unit and the 4-unit claimer,
                         the minimal model of the design notes.
     NO_MONITOR          leave INV2 to the lookup process alone, so
                         that a trail ends where the damage is done.
   model-mutant: -DRELEASE_CLEAR_FIRST  */

#define NUNITS 4                /* one bitmap word, cut down to 4 units */
#define NONE   255
#define KIND_NONE  0
#define KIND_SMALL 1

byte claim;                     /* region.claim[w]: bit u = unit u claimed */
byte back[NUNITS];              /* region.back[u] */
byte kind[NUNITS];              /* desc[u].kind, written by the winner */
byte downer[NUNITS];            /* desc[u] identity: the winner's _pid */

/* Ghost state, never read by the protocol itself.  */
byte gbase[NUNITS];             /* base of the live chunk holding u */
bool published[NUNITS];         /* chunk at base k handed to users */
byte pin[NUNITS];               /* users holding a block of chunk k */

#define BACK_OK(u) (gbase[u] == NONE || !published[gbase[u]] \
                    || back[u] == u - gbase[u])
#define INV2 (BACK_OK (0) && BACK_OK (1) && BACK_OK (2) && BACK_OK (3))

proctype claimer (byte w)
{
  byte occ = (1 << w) - 1;
  byte v, k, i;

end_idle:
  do
  :: v = claim;                 /* relaxed load of the claim word */
rescan:
     /* Any free stride-aligned run may be chosen: the C code takes,
        for a small chunk, the highest resident one its class left,
        else the highest resident one, else the highest one, and for a
        dedicated one the lowest; the model allows every order the scan
        could meet after other threads changed the word.  */
     atomic {
       k = 0;
       do
       :: k + w <= NUNITS && ((v >> k) & occ) == 0 -> break
       :: k + w <= NUNITS -> k = k + w
       :: k + w > NUNITS -> k = NONE; break
       od
     }
     if
     :: k == NONE -> v = 0; k = 0; goto end_idle   /* word full: retry */
     :: else
     fi;
#ifdef UNFIXED
     /* The original bug: speculative back-offsets before the CAS.  */
     for (i : 0 .. w - 1)
       {
         back[k + i] = i
       };
     i = 0;
#endif
     if
     :: atomic {
          claim == v ->         /* CAS acquire succeeds */
          claim = claim | (occ << k);
          for (i : 0 .. w - 1)
            {
              assert (gbase[k + i] == NONE);      /* INV1 */
              gbase[k + i] = k
            };
          i = 0
        }
     :: atomic {
          claim != v -> v = claim               /* CAS fails, v reloaded */
        };
        goto rescan
     fi;
#ifndef UNFIXED
     /* INV-CLAIM-PUBLISH: only the winner writes the back-offsets.  */
     for (i : 0 .. w - 1)
       {
         back[k + i] = i
       };
     i = 0;
#endif
     downer[k] = _pid;
     atomic { kind[k] = KIND_SMALL; published[k] = true };

     /* The chunk is in use; it is released once no block is held
        (used == 0), which the pin count stands for.  */
     atomic { pin[k] == 0 -> published[k] = false };
#ifdef RELEASE_CLEAR_FIRST
     atomic {
       claim = claim & ~(occ << k);
       for (i : 0 .. w - 1)
         {
           gbase[k + i] = NONE
         };
       i = 0
     };
#endif
     kind[k] = KIND_NONE;
     downer[k] = 0;
     for (i : 0 .. w - 1)
       {
         back[k + i] = 0
       };
     i = 0;
#ifndef RELEASE_CLEAR_FIRST
     atomic {                   /* fetch_and release: recyclable now */
       claim = claim & ~(occ << k);
       for (i : 0 .. w - 1)
         {
           gbase[k + i] = NONE
         };
       i = 0
     };
#endif
     v = 0;
     k = 0
  od
}

/* A thread that was handed a block of a published chunk and frees it:
   it resolves the block's unit to a descriptor through back[].  */
proctype lookup ()
{
  byte u, k, b;

end_wait:
  do
  :: atomic {
       if
       :: gbase[0] != NONE && published[gbase[0]] -> u = 0
       :: gbase[1] != NONE && published[gbase[1]] -> u = 1
       :: gbase[2] != NONE && published[gbase[2]] -> u = 2
       :: gbase[3] != NONE && published[gbase[3]] -> u = 3
       fi;
       k = gbase[u];
       pin[k]++
     };
     b = back[u];               /* relaxed load */
     assert (b <= u && u - b == k);             /* INV2 at the use */
     assert (kind[k] == KIND_SMALL && downer[k] != 0);
     atomic { pin[k]--; u = 0; k = 0; b = 0 }
  od
}

#ifndef NO_MONITOR
active proctype monitor ()
{
end_watch:
  atomic { !INV2 -> assert (INV2) }
}
#endif

init
{
  atomic {
    gbase[0] = NONE; gbase[1] = NONE; gbase[2] = NONE; gbase[3] = NONE;
#ifndef TWO_STRIDES
    run claimer (1);
#endif
    run claimer (2);
    run claimer (4);
    run lookup ()
  }
}
