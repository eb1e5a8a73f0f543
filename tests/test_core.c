#include <criterion/criterion.h>
#include "phax/core.h"
#include "testutil.h"
