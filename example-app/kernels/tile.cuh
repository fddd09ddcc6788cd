#pragma once
// How many matrices one block transposes at once: PLANES tiles of 32 x 33
// floats = 33792 bytes of static shared memory per block.
#define PLANES 8
