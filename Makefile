# The README's two commands, and the pieces they are made of.
.PHONY: demo test build deps clean

demo:
	scripts/demo.sh

test:
	scripts/test.sh

build:
	scripts/build.sh

deps:
	scripts/install_deps.sh

clean:
	rm -rf build
