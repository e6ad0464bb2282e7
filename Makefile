# The two commands a new user runs are `make demo` and `make test`; both
# install what is missing first. Meson and Ninja do the building.

.PHONY: all deps build demo test bench fuzz install deb clean

# make install PREFIX=/usr DESTDIR=/tmp/stage: meson's prefix and destdir.
PREFIX ?= /usr/local

all: build

deps:
	@scripts/deps.sh

build: deps
	@if [ ! -f build/build.ninja ]; then meson setup build; fi
	ninja -C build

demo: build
	scripts/demo.sh

test: deps
	scripts/test.sh

bench: build
	scripts/bench.sh

fuzz: deps
	scripts/fuzz.sh

install: build
	meson configure build -Dprefix=$(PREFIX)
	ninja -C build
	meson install -C build --no-rebuild $(if $(DESTDIR),--destdir "$(abspath $(DESTDIR))")

deb:
	@scripts/deps.sh deb
	scripts/deb.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz build-deb
