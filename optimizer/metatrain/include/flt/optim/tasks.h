#pragma once
// Kept so that code written against earlier releases compiles: this header moved to
// <flt/metatrain/tasks.h> when the optimizer's jobs got rooms of their own.
#include "flt/metatrain/tasks.h"
