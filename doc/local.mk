## doc/local.mk: the design documents, the benchmark chart and the
## examples (included by the top-level Makefile.am).

dist_doc_DATA += doc/kamepool-design.md doc/kamepool-model.md \
	doc/bench-size-sweep.svg
examplesdir = $(docdir)/examples
dist_examples_DATA = doc/examples/hand_example.c doc/examples/kamepool_demo.c
EXTRA_DIST += doc/examples/install-and-demo.sh

## The examples are built and run by "make check" against the build
## tree, so that the README's demonstration cannot rot.
check_PROGRAMS = doc/examples/hand_example doc/examples/kamepool_demo
doc_examples_hand_example_LDADD = libckarena.la
doc_examples_kamepool_demo_LDADD = libkamepool.la
check-local: check-examples
check-examples: $(check_PROGRAMS)
	@out=`./doc/examples/hand_example` || exit 1; \
	echo "$$out" | grep 'offsets: 0 64 72' >/dev/null || { echo "hand_example: $$out" >&2; exit 1; }; \
	./doc/examples/kamepool_demo >/dev/null || exit 1; \
	echo "examples: hand_example and kamepool_demo run"
.PHONY: check-examples
