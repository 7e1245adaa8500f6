## bench/local.mk: the benchmark programs and "make bench" (included by
## the top-level Makefile.am).  The programs are EXTRA_PROGRAMS, so
## neither "make" nor "make check" builds them; "make bench" builds them
## and runs bench/run-bench, which preloads each allocator in turn.

BENCH_PROGS = \
	bench/kprun \
	bench/arena_step \
	bench/loop \
	bench/prodcons \
	bench/larson \
	bench/xmix \
	bench/falseshare \
	bench/tlbchase \
	bench/mixed_large
EXTRA_PROGRAMS += $(BENCH_PROGS)
CLEANFILES += $(BENCH_PROGS)

## No sanitizers: a sanitizer runtime and a preloaded malloc fight over
## the same symbols.  Plain malloc/free, so no visibility flags either.
BENCH_CFLAGS = $(WARN_CFLAGS) -pthread
BENCH_LDADD = $(PTHREAD_LIBS)

bench_kprun_SOURCES = bench/kprun.c bench/bench.h
bench_kprun_CFLAGS = $(BENCH_CFLAGS)
bench_arena_step_SOURCES = bench/arena_step.c bench/bench.h
bench_arena_step_CFLAGS = $(BENCH_CFLAGS)
bench_arena_step_LDADD = libckarena.la $(BENCH_LDADD)
## A real executable, not a libtool wrapper script, so the preload and
## the peak RSS are those of the benchmark alone.
bench_arena_step_LDFLAGS = -no-install
bench_loop_SOURCES = bench/loop.c bench/bench.h
bench_loop_CFLAGS = $(BENCH_CFLAGS)
bench_loop_LDADD = $(BENCH_LDADD)
bench_prodcons_SOURCES = bench/prodcons.c bench/bench.h
bench_prodcons_CFLAGS = $(BENCH_CFLAGS)
bench_prodcons_LDADD = $(BENCH_LDADD)
bench_larson_SOURCES = bench/larson.c bench/bench.h
bench_larson_CFLAGS = $(BENCH_CFLAGS)
bench_larson_LDADD = $(BENCH_LDADD)
bench_xmix_SOURCES = bench/xmix.c bench/bench.h
bench_xmix_CFLAGS = $(BENCH_CFLAGS)
bench_xmix_LDADD = $(BENCH_LDADD)
bench_falseshare_SOURCES = bench/falseshare.c bench/bench.h
bench_falseshare_CFLAGS = $(BENCH_CFLAGS)
bench_falseshare_LDADD = $(BENCH_LDADD)
bench_tlbchase_SOURCES = bench/tlbchase.c bench/bench.h
bench_tlbchase_CFLAGS = $(BENCH_CFLAGS)
bench_tlbchase_LDADD = $(BENCH_LDADD)
bench_mixed_large_SOURCES = bench/mixed_large.c bench/bench.h
bench_mixed_large_CFLAGS = $(BENCH_CFLAGS)
bench_mixed_large_LDADD = $(BENCH_LDADD)

EXTRA_DIST += bench/run-bench bench/README doc/bench-size-sweep.svg

## The libraries come first: the driver preloads .libs/libkamepool.so.
## Results go to bench/results in the build tree; the size-sweep chart
## to doc/ in the source tree (see bench/README for the variables).
bench: $(lib_LTLIBRARIES) $(BENCH_PROGS)
	$(SHELL) $(srcdir)/bench/run-bench $(top_builddir) $(top_srcdir)
clean-local: clean-bench
clean-bench:
	-rm -rf bench/results
.PHONY: bench clean-bench
