## man/ckernel.mk: man pages of the ckernel part of libckarena, and the
## ckarena(7) overview of the whole library (included by Makefile.am).
## One full page per function family; the other names are ".so" pages.

dist_man_MANS += \
	man/man3/ck_bump_alloc_init.3 \
	man/man3/ck_bump_alloc_free.3 \
	man/man3/ck_bump_alloc_needs_weight_materialization.3 \
	man/man3/ck_huge_alloc.3 \
	man/man3/ck_huge_free.3 \
	man/man7/ckarena.7
