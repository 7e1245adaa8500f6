## man/ckernel.mk: man pages of the ckernel part of libckarena (included by Makefile.am).
