// The default hardware catalog, compiled into the binary. This is data, not code: the schema is in
// docs/configuration.md ("GPU catalog") and every figure follows ../shared/reference/hardware-facts.md
// (sections 1.2-1.4). Figures the fact sheet does not give, or flags as unverified, are listed in
// `unverified_fields` (and set `unverified: true` on a profile or kind whose placement or identity is
// itself unconfirmed).
//
// Conventions:
// - memory_mib (whole GPU) = nominal GB x 1024, as GPU Feature Discovery's nvidia.com/gpu.memory reports
//   for A100-40GB (40960); nvidia-smi totals differ slightly on other models.
// - usable_mib (MIG profile) = measured GiB x 1024, rounded down.
// - bf16_tflops = dense (no sparsity) public spec figures; fp16 tensor for Volta/Pascal. None are in the
//   fact sheet, so all are marked unverified.
namespace tessera {

// Declared in catalog.cc, which parses it once in Catalog::Default().
extern const char* const kDefaultCatalogYaml;
const char* const kDefaultCatalogYaml = R"yaml(
kinds:
  # ---------------------------------------------------------------- Ampere, 8 memory / 7 compute slices
  - id: a100-40gb
    aliases: [A100-SXM4-40GB, NVIDIA-A100-SXM4-40GB, A100-PCIE-40GB, NVIDIA-A100-PCIE-40GB]
    family: ampere
    memory_mib: 40960
    sms: 108
    bf16_tflops: 312
    unverified_fields: [bf16_tflops]
    notes: "98 of 108 SMs usable in 7g MIG mode. 1g.10gb is the double-memory 1g here (R525+)."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.5gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 4864,  sms: 14, max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.5gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 4864,  sms: 14, max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.10gb,   profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 9850,  sms: 14, max_count: 4, starts: [0, 2, 4, 6]}
        - {name: 2g.10gb,   profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 9850,  sms: 28, max_count: 3, starts: [0, 2, 4]}
        - {name: 3g.20gb,   profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 19968, sms: 42, max_count: 2, starts: [0, 4]}
        - {name: 4g.20gb,   profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 19968, sms: 56, max_count: 1, starts: [0]}
        - {name: 7g.40gb,   profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 40192, sms: 98, max_count: 1, starts: [0]}

  - id: a100-80gb
    aliases: [A100-SXM4-80GB, NVIDIA-A100-SXM4-80GB, A100-80GB-PCIe, NVIDIA-A100-80GB-PCIe]
    family: ampere
    memory_mib: 81920
    sms: 108
    bf16_tflops: 312
    unverified_fields: [bf16_tflops]
    notes: "1g.10gb and 7g.80gb usable memory are ranges in public outputs (9.50-9.75, 78.5-78.75 GiB); the lower bound is used."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.10gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 9728,  sms: 14, max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.10gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 9728,  sms: 14, max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.20gb,    profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 19968, sms: 14, max_count: 4, starts: [0, 2, 4, 6]}
        - {name: 2g.20gb,    profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 19968, sms: 28, max_count: 3, starts: [0, 2, 4]}
        - {name: 3g.40gb,    profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 40192, sms: 42, max_count: 2, starts: [0, 4]}
        - {name: 4g.40gb,    profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 40192, sms: 56, max_count: 1, starts: [0]}
        - {name: 7g.80gb,    profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 80384, sms: 98, max_count: 1, starts: [0]}

  # ---------------------------------------------------------------- Ampere A30, 4 memory / 4 compute slices
  - id: a30-24gb
    aliases: [A30, NVIDIA-A30]
    family: ampere
    memory_mib: 24576
    sms: 56
    bf16_tflops: 165
    unverified_fields: [sms, bf16_tflops]
    notes: "Profile ids collide with different A100/H100 profiles. Usable memory and SMs per profile are estimates (A100-40GB usable/nominal ratios per slice count; 14 SMs per compute slice)."
    mig:
      memory_slices: 4
      compute_slices: 4
      max_instances: 4
      profiles:
        - {name: 1g.6gb,     profile_id: 14, compute_slices: 1, memory_slices: 1, usable_mib: 5836,  sms: 14, max_count: 4, starts: [0, 1, 2, 3], unverified_fields: [usable_mib, sms]}
        - {name: 1g.6gb+me,  profile_id: 21, compute_slices: 1, memory_slices: 1, usable_mib: 5836,  sms: 14, max_count: 1, starts: [0, 1, 2, 3], unverified_fields: [usable_mib, sms]}
        - {name: 2g.12gb,    profile_id: 5,  compute_slices: 2, memory_slices: 2, usable_mib: 11817, sms: 28, max_count: 2, starts: [0, 2], unverified_fields: [usable_mib, sms]}
        - {name: 2g.12gb+me, profile_id: 6,  compute_slices: 2, memory_slices: 2, usable_mib: 11817, sms: 28, max_count: 1, starts: [0, 2], unverified_fields: [usable_mib, sms]}
        - {name: 4g.24gb,    profile_id: 0,  compute_slices: 4, memory_slices: 4, usable_mib: 24107, sms: 56, max_count: 1, starts: [0], unverified_fields: [usable_mib, sms]}

  # ---------------------------------------------------------------- Hopper
  - id: h100-80gb
    aliases: [NVIDIA-H100-80GB-HBM3, H100-SXM5-80GB, NVIDIA-H100-SXM5-80GB]
    family: hopper
    memory_mib: 81920
    sms: 132
    bf16_tflops: 989
    unverified_fields: [bf16_tflops]
    notes: "SXM5 figures. H100 PCIe (114 SMs) shares the profiles but not the SM counts, so it is deliberately not an alias."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.10gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 9984,  sms: 16,  max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.10gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 9984,  sms: 16,  max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.20gb,    profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 20090, sms: 26,  max_count: 4, starts: [0, 2, 4, 6]}
        - {name: 2g.20gb,    profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 20090, sms: 32,  max_count: 3, starts: [0, 2, 4]}
        - {name: 3g.40gb,    profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 40448, sms: 60,  max_count: 2, starts: [0, 4]}
        - {name: 4g.40gb,    profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 40448, sms: 64,  max_count: 1, starts: [0]}
        - {name: 7g.80gb,    profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 81152, sms: 132, max_count: 1, starts: [0]}

  - id: h100-94gb
    aliases: [NVIDIA-H100-NVL, H100-NVL]
    family: hopper
    memory_mib: 96256
    sms: 132
    bf16_tflops: 835
    unverified_fields: [bf16_tflops]
    notes: "H100 NVL (and H100 SXM5 94GB). bf16 is the NVL figure; the SXM5 94GB part is faster. GFD reported mig-1g.12gb.memory=11008."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.12gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 11008, sms: 16,  max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.12gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 11008, sms: 16,  max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6]}
        - {name: 1g.24gb,    profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 22138, sms: 26,  max_count: 4, starts: [0, 2, 4, 6]}
        - {name: 2g.24gb,    profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 22138, sms: 32,  max_count: 3, starts: [0, 2, 4]}
        - {name: 3g.47gb,    profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 47493, sms: 60,  max_count: 2, starts: [0, 4]}
        - {name: 4g.47gb,    profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 47493, sms: 64,  max_count: 1, starts: [0]}
        - {name: 7g.94gb,    profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 95354, sms: 132, max_count: 1, starts: [0]}

  - id: h200-141gb
    aliases: [NVIDIA-H200, NVIDIA-H200-NVL, H200]
    family: hopper
    memory_mib: 144384
    sms: 132
    bf16_tflops: 989
    unverified_fields: [bf16_tflops]
    notes: "No public -lgipp output: placements and profile ids are assumed equal to H100 (unverified on every profile). 1g.35gb/3g.71gb/4g.71gb usable memory is estimated at 16.25 GiB per memory slice (observed 2g.35gb = 32.5 GiB); their SMs are taken from H100 (same die, same observed 1g/2g/7g SMs). H200 NVL has a lower bf16 figure."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.18gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 16384,  sms: 16,  max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6], unverified: true, unverified_fields: [profile_id, starts]}
        - {name: 1g.18gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 16384,  sms: 16,  max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6], unverified: true, unverified_fields: [profile_id, starts, usable_mib]}
        - {name: 1g.35gb,    profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 33280,  sms: 26,  max_count: 4, starts: [0, 2, 4, 6], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 2g.35gb,    profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 33280,  sms: 32,  max_count: 3, starts: [0, 2, 4], unverified: true, unverified_fields: [profile_id, starts]}
        - {name: 3g.71gb,    profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 66560,  sms: 60,  max_count: 2, starts: [0, 4], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 4g.71gb,    profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 66560,  sms: 64,  max_count: 1, starts: [0], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 7g.141gb,   profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 143360, sms: 132, max_count: 1, starts: [0], unverified: true, unverified_fields: [profile_id, starts]}

  # ---------------------------------------------------------------- Blackwell
  - id: b200-180gb
    aliases: [NVIDIA-B200, B200]
    family: blackwell
    memory_mib: 184320
    sms: 148
    bf16_tflops: 2250
    unverified_fields: [sms, bf16_tflops]
    notes: "Slices, counts and names are documented; placements and profile ids are assumed equal to H100. Usable memory is an estimate (per memory slice 20.75 GiB = nominal/8 x the H200 small-profile ratio 0.922; 7g = nominal x 140/141); profile SMs unknown (0: compute share falls back to compute slices)."
    mig:
      memory_slices: 8
      compute_slices: 7
      max_instances: 7
      profiles:
        - {name: 1g.23gb,    profile_id: 19, compute_slices: 1, memory_slices: 1, usable_mib: 21248,  sms: 0, max_count: 7, starts: [0, 1, 2, 3, 4, 5, 6], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 1g.23gb+me, profile_id: 20, compute_slices: 1, memory_slices: 1, usable_mib: 21248,  sms: 0, max_count: 1, starts: [0, 1, 2, 3, 4, 5, 6], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 1g.45gb,    profile_id: 15, compute_slices: 1, memory_slices: 2, usable_mib: 42496,  sms: 0, max_count: 4, starts: [0, 2, 4, 6], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 2g.45gb,    profile_id: 14, compute_slices: 2, memory_slices: 2, usable_mib: 42496,  sms: 0, max_count: 3, starts: [0, 2, 4], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 3g.90gb,    profile_id: 9,  compute_slices: 3, memory_slices: 4, usable_mib: 84992,  sms: 0, max_count: 2, starts: [0, 4], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 4g.90gb,    profile_id: 5,  compute_slices: 4, memory_slices: 4, usable_mib: 84992,  sms: 0, max_count: 1, starts: [0], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}
        - {name: 7g.180gb,   profile_id: 0,  compute_slices: 7, memory_slices: 8, usable_mib: 182784, sms: 0, max_count: 1, starts: [0], unverified: true, unverified_fields: [profile_id, starts, usable_mib, sms]}

  # ---------------------------------------------------------------- not MIG-capable
  - id: l40s-48gb
    aliases: [NVIDIA-L40S, L40S]
    family: ada
    memory_mib: 49152
    sms: 142
    bf16_tflops: 362
    unverified_fields: [memory_mib, sms, bf16_tflops]

  - id: l4-24gb
    aliases: [NVIDIA-L4, L4]
    family: ada
    memory_mib: 24576
    sms: 58
    bf16_tflops: 121
    unverified_fields: [memory_mib, sms, bf16_tflops]

  - id: a10-24gb
    aliases: [NVIDIA-A10, A10]
    family: ampere
    memory_mib: 24576
    sms: 72
    bf16_tflops: 125
    unverified_fields: [memory_mib, sms, bf16_tflops]

  - id: t4-16gb
    aliases: [Tesla-T4, NVIDIA-T4, T4]
    family: turing
    memory_mib: 16384
    sms: 40
    bf16_tflops: 65
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "No bf16: the figure is fp16 tensor."

  - id: v100-16gb
    aliases: [Tesla-V100-SXM2-16GB, Tesla-V100-PCIE-16GB, V100M16]
    family: volta
    memory_mib: 16384
    sms: 80
    bf16_tflops: 125
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "No bf16: the figure is fp16 tensor (SXM2)."

  - id: v100-32gb
    aliases: [Tesla-V100-SXM2-32GB, Tesla-V100-PCIE-32GB, Tesla-V100S-PCIE-32GB, V100M32]
    family: volta
    memory_mib: 32768
    sms: 80
    bf16_tflops: 125
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "No bf16: the figure is fp16 tensor (SXM2)."

  - id: p100-16gb
    aliases: [Tesla-P100-PCIE-16GB, Tesla-P100-SXM2-16GB, P100]
    family: pascal
    memory_mib: 16384
    sms: 56
    bf16_tflops: 19
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "No bf16 and no tensor cores: the figure is fp16 (about 18.7 PCIe, 21.2 SXM2)."

  # ---------------------------------------------------------------- Alibaba openb trace models
  # The trace (../shared/traces/alibaba-gpu-2023) names three undisclosed models G1, G2, G3. The trace
  # does not model GPU memory or speed: 32768 MiB is a placeholder large enough never to bind, SMs and
  # bf16 are 0 (unknown).
  - id: alibaba-g1
    aliases: [G1]
    family: unknown
    memory_mib: 32768
    sms: 0
    bf16_tflops: 0
    unverified: true
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "Undisclosed model from the Alibaba openb trace; memory is a placeholder."
  - id: alibaba-g2
    aliases: [G2]
    family: unknown
    memory_mib: 32768
    sms: 0
    bf16_tflops: 0
    unverified: true
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "Undisclosed model from the Alibaba openb trace; memory is a placeholder."
  - id: alibaba-g3
    aliases: [G3]
    family: unknown
    memory_mib: 32768
    sms: 0
    bf16_tflops: 0
    unverified: true
    unverified_fields: [memory_mib, sms, bf16_tflops]
    notes: "Undisclosed model from the Alibaba openb trace; memory is a placeholder."
)yaml";

}  // namespace tessera
