## lib/ckarena/local.mk: libckarena, the arena allocators for compute
## kernels (included by the top-level Makefile.am).

include_HEADERS += include/ckernel_alloc.h
tinyllmincludedir = $(includedir)/tinyllm
tinyllminclude_HEADERS = include/tinyllm/abi.h include/tinyllm/arena.h

lib_LTLIBRARIES += libckarena.la
libckarena_la_SOURCES = \
	lib/env-flag.h \
	lib/ckarena/abi.c \
	lib/ckarena/arena.c \
	lib/ckarena/ckernel_alloc.c
libckarena_la_CPPFLAGS = $(AM_CPPFLAGS) -DBUILDING_LIBCKARENA
libckarena_la_LIBADD = $(PTHREAD_LIBS)
libckarena_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -version-info $(CKARENA_LT_VERSION)
if HAVE_LD_VERSION_SCRIPT
libckarena_la_LDFLAGS += -Wl,--version-script=$(srcdir)/lib/ckarena/libckarena.map
EXTRA_libckarena_la_DEPENDENCIES = lib/ckarena/libckarena.map
else
libckarena_la_LDFLAGS += -export-symbols-regex '^(ck_|tl_)'
endif
EXTRA_DIST += lib/ckarena/libckarena.map

pkgconfig_DATA += ckarena.pc
