## lib/kamepool/local.mk: libkamepool, the lock-free pool allocator
## (included by the top-level Makefile.am).

include_HEADERS += include/kame_pool.h
lib_LTLIBRARIES += libkamepool.la
libkamepool_la_SOURCES = \
	lib/kamepool/kp_internal.h \
	lib/env-flag.h \
	lib/kamepool/os.c \
	lib/kamepool/options.c \
	lib/kamepool/radix.c \
	lib/kamepool/region.c \
	lib/kamepool/purge.c \
	lib/kamepool/sizeclass.c \
	lib/kamepool/sizeclass-lut.h \
	lib/kamepool/thread.c \
	lib/kamepool/chunk.c \
	lib/kamepool/prof.c \
	lib/kamepool/guard.c \
	lib/kamepool/shared.c \
	lib/kamepool/heap.c \
	lib/kamepool/large.c \
	lib/kamepool/cache.c \
	lib/kamepool/largealloc.c \
	lib/kamepool/alloc.c \
	lib/kamepool/misuse.c \
	lib/kamepool/stats.c \
	lib/kamepool/trim.c \
	lib/kamepool/policy.c \
	lib/kamepool/numa.c \
	lib/kamepool/api.c \
	lib/kamepool/init.c
if KP_INTERPOSE
libkamepool_la_SOURCES += lib/kamepool/interpose.c lib/kamepool/mallinfo.c
endif
libkamepool_la_CPPFLAGS = $(AM_CPPFLAGS) -DBUILDING_LIBKAMEPOOL
## The hot paths are small; -O2 with no semantic interposition lets the
## compiler inline them into every entry point.  No SLP vectorising: gcc
## 12 joins the two stores of a freed block's link and tag through an
## SSE register, four instructions where two do.
libkamepool_la_CFLAGS = $(AM_CFLAGS) -fno-semantic-interposition -ftls-model=$(KP_TLS_MODEL) \
	-fno-tree-slp-vectorize
libkamepool_la_LIBADD = $(NUMA_LIBS) $(PTHREAD_LIBS) $(UNWIND_LIBS) $(LIBS)
libkamepool_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -version-info $(KAMEPOOL_LT_VERSION)
if HAVE_LD_VERSION_SCRIPT
libkamepool_la_LDFLAGS += -Wl,--version-script=$(srcdir)/lib/kamepool/libkamepool.map
EXTRA_libkamepool_la_DEPENDENCIES = lib/kamepool/libkamepool.map
endif
EXTRA_DIST += lib/kamepool/layers.sh
EXTRA_DIST += lib/kamepool/libkamepool.map lib/kamepool/gen-sizeclass-lut.sh \
	kamepool-run.in

pkgconfig_DATA += kamepool.pc

## libkamepool-cxx: operator new and delete (new.cc).  A library of its
## own so that libkamepool does not bring libstdc++ into every C
## program that preloads it; see the comment at the top of new.cc.
if KP_INTERPOSE
if KP_CXX
lib_LTLIBRARIES += libkamepool-cxx.la
libkamepool_cxx_la_SOURCES = lib/kamepool/new.cc
libkamepool_cxx_la_CPPFLAGS = $(AM_CPPFLAGS)
libkamepool_cxx_la_CXXFLAGS = $(AM_CXXFLAGS) -std=gnu++17
libkamepool_cxx_la_LIBADD = libkamepool.la
libkamepool_cxx_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined \
	-version-info $(KAMEPOOL_LT_VERSION)
pkgconfig_DATA += kamepool-cxx.pc
endif
endif

## kamepool-run: made by make, so that it names the installed library.
bin_SCRIPTS += kamepool-run
CLEANFILES += kamepool-run
kamepool-run: $(srcdir)/kamepool-run.in Makefile
	$(AM_V_GEN)sed -e 's|@libdir[@]|$(libdir)|g' \
	  -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	  $(srcdir)/kamepool-run.in > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
