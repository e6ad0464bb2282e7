# The two commands a new user runs are `make demo` and `make test`; both
# install what is missing first. Meson and Ninja do the building.

.PHONY: all deps build demo test bench fuzz clean

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

clean:
	rm -rf build build-asan build-tsan build-fuzz
