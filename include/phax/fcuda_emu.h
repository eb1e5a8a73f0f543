// fast/cuda on the CPU emulation of the CUDA model (phax_cuda_emu; fast/cuda/emu/): every entry
// point of phax/fcuda.h and phax/fcuda_decode.h declared under its emulator's name,
// fcuda_emu_<op>, beside the device's fcuda_<op> (same contract; every pointer is emulated
// device memory, which is host memory). After this header fcuda_<op> still names the device's
// entry, unless PHAX_FCUDA_EMU_KEEP_NAMES was defined first (fast/cuda's sources compiled for
// the emulator: their fcuda_<op> are then the emulator's).
#ifndef PHAX_FCUDA_EMU_H
#define PHAX_FCUDA_EMU_H

#include "phax/fcuda.h"
#include "phax/fcuda_decode.h"

#include "phax/fcuda_emu_names.h"  // on: fcuda_<op> reads fcuda_emu_<op>
#include "phax/fcuda.h"            // the declarations again, under those names
#include "phax/fcuda_decode.h"
#ifndef PHAX_FCUDA_EMU_KEEP_NAMES
#include "phax/fcuda_emu_names.h"  // off again
#endif

#endif
