## man/tinyllm.mk: man pages of the tinyllm part of libckarena (included
## by Makefile.am).  One full page per function family; the other names
## of a family are ".so" alias pages.

dist_man_MANS += \
	man/man3/tl_arena_create.3 \
	man/man3/tl_arena_alloc.3 \
	man/man3/tl_arena_mark_get.3 \
	man/man3/tl_arena_reset_to.3 \
	man/man3/tl_arena_stats_get.3 \
	man/man3/tl_arena_destroy.3
dist_man_MANS += \
	man/man3/tl_status_str.3 \
	man/man3/tl_set_last_error.3 \
	man/man3/tl_last_error.3 \
	man/man3/tl_clear_last_error.3
dist_man_MANS += \
	man/man3/tl_alloc.3 \
	man/man3/tl_free.3 \
	man/man3/tl_set_allocator.3 \
	man/man3/tl_get_allocator.3
dist_man_MANS += \
	man/man3/tl_abi_version.3
