// Stands in for mpi_communicator.cpp in a build without the `mpi` Meson feature: no MPI
// communicator (make_world() then applies the mpirun guard).
#include "communicator.hpp"

namespace tensor::dist::internal {

std::unique_ptr<Communicator> make_mpi_world() { return nullptr; }
std::string mpi_library_version() { return {}; }
bool mpi_raw_allreduce_sum_f32(float*, std::size_t) { return false; }

}  // namespace tensor::dist::internal
