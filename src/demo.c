#include "phax/ref.h"
int phax_demo_main(int argc, char **argv) { (void)argc; (void)argv; return 0; }
