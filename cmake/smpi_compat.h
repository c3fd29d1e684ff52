// Force-included after SimGrid's smpi_helpers.h in the SMPI build (MDTP_SMPI=ON).  smpicxx injects
// that header into every translation unit; its function-like macros (exit, getpid, sleep, the
// clocks, malloc) are meant for C programs and break C++ standard headers (`std::exit`,
// `<malloc.h>` declarations).  mdtp does not rely on them: simulated time is read with MPI_Wtime
// and charged with smpi_execute_flops, explicitly, in the files that need it.
#pragma once
#undef sleep
#undef usleep
#undef gettimeofday
#undef nanosleep
#undef clock_gettime
#undef getopt
#undef getopt_long
#undef getopt_long_only
#undef exit
#undef getpid
