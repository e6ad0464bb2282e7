/* The libFuzzer entry point every target defines. */
#ifndef VMIO_TESTS_FUZZ_H
#define VMIO_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
