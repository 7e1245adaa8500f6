## man/tinyllm.mk: man pages of the tinyllm part of libckarena (included by Makefile.am).
