// lsio/lsio.h: umbrella header of the lsio C++ API (see array.h; ranges.h for byte ranges without Zarr).
#pragma once

#include "lsio/array.h"
#include "lsio/box.h"
#include "lsio/options.h"
#include "lsio/ranges.h"
#include "lsio/status.h"
