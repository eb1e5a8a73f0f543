#include <criterion/criterion.h>
#include "phax/ref.h"
#include "testutil.h"
