#include "phax/ref.h"
