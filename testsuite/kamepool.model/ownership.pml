/* ownership.pml: Spin model of the owned bit on a chunk's remote-free
   list: remote push, batched remote frees, owner collect, abandon,
   adopt, and release when empty, for three threads sharing one chunk
   of three blocks.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Mirrors lib/kamepool/chunk.c, desc.xthread_free = list | KP_TF_OWNED
   (the study's kp_collect, kp_abandon and kp_adopt_abandoned are
   kp_chunk_collect, kp_chunk_abandon and kp_chunk_adopt there):
     kp_free (fast path)  desc.owner loaded relaxed; the owner pushes on
                          its private list and decrements used.
     kp_free_remote       CAS push (acq_rel, failure relaxed) that
                          always sets OWNED; a pusher that found OWNED
                          clear owns the abandoned chunk and runs
                          kp_abandoned_collect.  This is the path of a
                          thread with no heap; a thread with one puts
                          the block in its batch (plain stores, thread-
                          private; the block still counts in used).
     kp_rbatch_flush      the batch, bound 2 blocks here, published as
                          one list with one CAS that always sets OWNED,
                          as the single push; found clear, the flusher
                          owns the chunk and runs kp_abandoned_collect.
                          Any time the batch is not empty (bound
                          reached, slot needed, refill, trim, fork), and
                          always before the thread exits.
     kp_chunk_collect     owner exchange (xthread_free, OWNED) acquire,
                          moves the blocks to its free list, used -= n.
     kp_chunk_abandon     owner = NULL relaxed, CAS OWNED -> 0 release;
                          on failure the owner keeps the chunk and
                          collects (refill: chunk full; thread exit:
                          collect, release if empty, else abandon).
     kp_abandoned_collect loop { collect; used == 0: release; reclaim
                          (owner = self); or CAS OWNED -> 0 release to
                          re-abandon, looping when it fails }.
     kp_chunk_adopt       CAS OWNED into an abandoned list (acquire),
                          check kind, owner = self, collect.
     kp_chunk_release     exclusive owner, used == 0: owner = NULL, then
                          xthread_free = OWNED relaxed (DEAD: no stale
                          CAS can own it), then kp_units_release.
   The block list is abstracted to a set (bit b + 1 = block b) and the
   carving of fresh blocks to a full initial free list.  Spin explores
   sequentially consistent interleavings; doc/kamepool-model.md says why
   the orders above suffice in C11.

   Invariants:
     every block is in exactly one place: held by one thread, on the
       owner's list, on xthread_free, or in a collect in progress (no
       block lost, none freed twice), and used counts those outside;
     at most one thread owns the chunk, and only while OWNED is set;
     exactly one thread releases the chunk (at most one, checked at each
       release; at least one, checked when every thread has quit);
     a chunk with live blocks is never released, nor one whose blocks
       wait in a batch;
     a released chunk is never owned again through its stale list.

   The batches take the search to a depth of about 513000 steps
   (2.6 million states, 400 MB, seconds):
   pan-args: -m600000

   Build switches (spin -D): RELEASE_NOT_DEAD is the broken rule of
   ownership-unfixed.pml; the mutants below break one rule each.
   model-mutant: -DABANDON_BLIND_STORE
   model-mutant: -DCOLLECT_LOAD_THEN_STORE
   model-mutant: -DPUSH_WITHOUT_OWNED
   model-mutant: -DPUSHER_IGNORES_ABANDONED
   model-mutant: -DFLUSH_LOAD_THEN_STORE
   model-mutant: -DBATCH_GIVES_BACK_EARLY
   FLUSH_IGNORES_ABANDONED is the broken rule of
   ownership-batch-unfixed.pml.  */

#define NTHR  3
#define NBLK  3
#define OWNED 1
#define ALL   14                /* blocks 1..3 at bits 1..3 */
#define BIT(b) (1 << (b))
#define IN(x, b) (((x) >> (b)) & 1)
#define POPC(x) (IN (x, 1) + IN (x, 2) + IN (x, 3))
#define KIND_NONE  0
#define KIND_SMALL 1

byte xtf = OWNED;               /* desc.xthread_free */
byte owner = 1;                 /* desc.owner: thread id or 0 (NULL) */
byte freel = ALL;               /* owner's free list (line 0) */
byte used;                      /* owner-private, line 0 */
byte kind = KIND_SMALL;         /* desc.kind */

/* Ghost state.  */
byte gown = 1;                  /* exclusive owner by the owned bit */
byte holder[NBLK + 1];          /* user thread holding block b, or 0 */
byte inhand;                    /* blocks taken by a collect in progress */
byte batch[NTHR + 1];           /* blocks in thread t's batch (private) */
bool released;
byte releases;
bool quit[NTHR + 1];
byte nquit;

#define WHERE(b) ((holder[b] != 0) + IN (freel, b) + IN (xtf, b) \
                  + IN (inhand, b) + IN (batch[1], b) + IN (batch[2], b) \
                  + IN (batch[3], b))
#define CONSERVED (WHERE (1) == 1 && WHERE (2) == 1 && WHERE (3) == 1 \
                   && used + POPC (freel) == NBLK)
#define EXCLUSIVE ((gown == 0 || (xtf & OWNED)) \
                   && (owner == 0 || owner == gown))
#define DEAD_EMPTY (!released || (freel == ALL && owner == 0 \
                                  && gown == 0 && inhand == 0))
#define INV (CONSERVED && EXCLUSIVE && DEAD_EMPTY)

#define HOLDS(t) (holder[1] == (t) || holder[2] == (t) || holder[3] == (t))

inline pick (b, set)
{
  if
  :: IN (set, 1) -> b = 1
  :: IN (set, 2) -> b = 2
  :: IN (set, 3) -> b = 3
  fi
}

inline pick_held (b)
{
  if
  :: holder[1] == me -> b = 1
  :: holder[2] == me -> b = 2
  :: holder[3] == me -> b = 3
  fi
}

/* kp_chunk_collect: the caller owns the chunk.  The splice onto the
   free list and used -= n touch owner-private fields only, so they
   share the step of the exchange.  The C code first loads the word
   relaxed and skips the exchange when the list is empty; that load is
   the same as an exchange of an empty list.  */
inline collect ()
{
#ifdef COLLECT_LOAD_THEN_STORE
  tf = xtf;
  atomic {
    xtf = OWNED; inhand = tf & ~OWNED;
#else
  atomic {                      /* exchange acquire */
    assert (gown == me && (xtf & OWNED));
    tf = xtf; xtf = OWNED; inhand = tf & ~OWNED;
#endif
    freel = freel | inhand; used = used - POPC (inhand);
    inhand = 0; tf = 0
  }
}

/* kp_chunk_release: exclusive owner and used == 0.  */
inline release ()
{
  assert (gown == me && used == 0);
  assert (freel == ALL && !(xtf & ~OWNED));     /* no live block */
  owner = 0;
  atomic {
#ifdef RELEASE_NOT_DEAD
    xtf = 0;
#else
    xtf = OWNED;                /* DEAD */
#endif
    gown = 0; released = true; releases++;
    assert (releases == 1)
  };
  kind = KIND_NONE              /* kp_units_release */
}

/* kp_chunk_abandon: owner = NULL, then CAS OWNED -> 0 (release).  */
inline abandon ()
{
  owner = 0;
#ifdef ABANDON_BLIND_STORE
  atomic { xtf = 0; gown = 0 }
#else
  if
  :: atomic { xtf == OWNED -> xtf = 0; gown = 0 }
  :: atomic { xtf != OWNED -> skip };           /* remote frees came */
     owner = me;
     collect ()
  fi
#endif
}

/* kp_abandoned_collect: a remote pusher found OWNED clear.  */
inline abandoned_collect ()
{
  do
  :: collect ();
     if
     :: used == 0 -> release (); break
     :: else ->
        if
        :: owner = me; break                    /* kp_heap_reclaim */
        :: atomic { xtf == OWNED -> xtf = 0; gown = 0 }; break
        :: atomic { xtf != OWNED -> skip }      /* new frees: loop */
        fi
     fi
  od
}

/* kp_rbatch_flush: publish this thread's batch, the list head .. tail
   linked in private, with one CAS: tail->link = old head, then
   xthread_free from old to head | OWNED.  */
inline flush ()
{
#ifdef FLUSH_LOAD_THEN_STORE
  old = xtf;                    /* the CAS as a load, then a store */
  atomic {
#else
  atomic {                      /* the CAS loop as one read-modify-write */
    old = xtf;
#endif
    assert (!(old & batch[me]) && kind == KIND_SMALL && !released);
    xtf = old | batch[me] | OWNED;
    batch[me] = 0;
    if
    :: !(old & OWNED) ->
       assert (gown == 0 && !released); gown = me
    :: else
    fi
  };
  if
#ifdef FLUSH_IGNORES_ABANDONED
  :: !(old & OWNED) -> gown = 0 /* publishes, and leaves the chunk */
#else
  :: !(old & OWNED) -> abandoned_collect ()
#endif
  :: else
  fi;
  old = 0
}

proctype thread (byte me)
{
  byte b, o, old, tf;

end_loop:
  do
  :: atomic {                   /* malloc: pop the owner's list, and */
       gown == me && owner == me && freel != 0 ->       /* hand the */
       pick (b, freel);         /* block to the thread that will free it */
       freel = freel & ~BIT (b); used++;
       if
       :: !quit[1] -> holder[b] = 1
       :: !quit[2] -> holder[b] = 2
       :: !quit[3] -> holder[b] = 3
       fi;
       b = 0
     }
  :: atomic { pick_held (b) };  /* free (kp_free) */
     o = owner;                 /* relaxed */
     if
     :: o == me ->
        atomic {
          assert (gown == me);
          freel = freel | BIT (b); holder[b] = 0; used--; b = 0; o = 0
        };
        if
        :: used == 0 -> release ()       /* kp_chunk_retire, not active */
        :: true                          /* kept as the active chunk */
        fi
     :: o != me ->              /* kp_free_remote, batched */
        o = 0;
        atomic {
          assert (kind == KIND_SMALL && !IN (batch[me], b));
          batch[me] = batch[me] | BIT (b); holder[b] = 0; b = 0;
#ifdef BATCH_GIVES_BACK_EARLY
          used--                /* counts the block back before the flush */
#endif
        };
        if
        :: POPC (batch[me]) == 2 -> flush ()  /* the bound */
        :: else
        fi
     :: o != me ->              /* kp_free_remote, no heap */
        o = 0;
        assert (kind == KIND_SMALL);
        atomic {                /* the CAS loop as one read-modify-write */
          old = xtf;
          assert (!IN (old, b));
#ifdef PUSH_WITHOUT_OWNED
          xtf = old | BIT (b);
#else
          xtf = old | BIT (b) | OWNED;
#endif
          holder[b] = 0; b = 0;
          if
          :: !(old & OWNED) ->
             assert (gown == 0 && !released); gown = me
          :: else
          fi
        };
        if
#ifdef PUSHER_IGNORES_ABANDONED
        :: !(old & OWNED) -> gown = 0   /* forgets it owns the chunk */
#else
        :: !(old & OWNED) -> abandoned_collect ()
#endif
        :: else
        fi;
        old = 0
     fi
  :: batch[me] != 0 -> flush ()   /* slot needed, refill, trim, fork, exit */
  :: gown == me && owner == me && freel == 0 ->   /* kp_malloc_refill */
     collect ();
     if
     :: freel == 0 -> abandon ()
     :: else
     fi
  :: gown == me && owner == me ->        /* thread exit */
     collect ();
     if
     :: used == 0 -> release ()
     :: else -> abandon ()
     fi
  :: atomic {                   /* kp_chunk_adopt, maybe stale: */
       gown != me && !(xtf & OWNED) ->  /* CAS loop, acquire */
       xtf = xtf | OWNED;
       assert (gown == 0); assert (!released); gown = me
     };
     assert (kind == KIND_SMALL);       /* the adopter's validation */
     owner = me;
     collect ()
  :: atomic {
       gown != me && !HOLDS (me) && batch[me] == 0 ->
       quit[me] = true; nquit++;
       if
       :: nquit == NTHR -> assert (released && releases == 1)
       :: else
       fi
     };
     break
  od
}

active proctype monitor ()
{
end_watch:
  atomic { !INV -> assert (INV) }
}

init
{
  atomic {
    run thread (1);
    run thread (2);
    run thread (3)
  }
}
