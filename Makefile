# The README's two commands, and the pieces they are made of.
.PHONY: demo test build deps manylinux clean

demo:
	scripts/demo.sh

test:
	scripts/test.sh

build:
	scripts/build.sh

deps:
	scripts/install_deps.sh

# The self-contained wheel (dist/manylinux/), built in a Debian 11 root:
# needs root; about half an hour the first time (docs/install.md).
manylinux:
	scripts/manylinux/build.sh

clean:
	rm -rf build
