## doc/local.mk: rules for this part (included by the top-level Makefile.am).
