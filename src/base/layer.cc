// Linked into every layer library so that a layer without sources of its own still forms a library.
namespace tessera::internal {
int LayerAnchor() { return 0; }
}  // namespace tessera::internal
