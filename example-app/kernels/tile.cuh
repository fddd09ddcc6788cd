#pragma once
// How many matrices one block transposes at once.
#define PLANES 5
