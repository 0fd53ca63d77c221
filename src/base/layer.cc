// The one source of a layer library without sources of its own (CMakeLists.txt tessera_layer).
namespace tessera::internal {
int LayerAnchor() { return 0; }
}  // namespace tessera::internal
