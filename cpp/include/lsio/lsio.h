// lsio/lsio.h: umbrella header of the lsio C++ API (see array.h).
#pragma once

#include "lsio/array.h"
#include "lsio/box.h"
#include "lsio/options.h"
#include "lsio/status.h"
