## man/kamepool.mk: the man pages of libkamepool and kamepool-run
## (included by the top-level Makefile.am).  One full page per function
## family; the other names of a family are ".so" alias pages.

dist_man_MANS += \
	man/man3/kame_pool_malloc.3 \
	man/man3/kame_pool_calloc.3 \
	man/man3/kame_pool_realloc.3 \
	man/man3/kame_pool_free.3
