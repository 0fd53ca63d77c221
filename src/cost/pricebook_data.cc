// Default price book (2024 list prices, price_date 2024-12-31): data, not code. Figures from
// hardware-facts.md section 4 ("not authoritative, re-check before use"); every entry carries its source,
// date and validity window. The current book after the 2025 cuts is examples/cost/prices-2025.yaml.
// Mirrored in examples/cost/prices.yaml (a test checks that the two agree).
#include <string_view>

#include "cost/pricebook.h"

namespace tessera {

std::string_view PriceBook::DefaultYaml() {
  static constexpr std::string_view kYaml = R"yaml(# Tessera default price book: 2024 list prices (USD, Linux). Per-GPU-hour = instance price / GPUs.
# Figures: hardware-facts.md section 4; not authoritative, re-check before use. Every dated entry holds at
# the book's price_date (valid_from <= price_date < valid_until); undated entries (point-in-time catalog
# snapshots) are marked so by having no window. Current prices after the 2025 cuts: prices-2025.yaml.
title: "2024 list prices (before the June 2025 P5 cut)"
price_date: "2024-12-31"
# The book's own window: where its point-in-time entries (a date, no window) and carried-forward entries price
# usage: the 2024 prices until the June 2025 P5 cut (prices-2025.yaml from then).
valid_from: "2024-01-01"
valid_until: "2025-06-01"

# On-demand list price per GPU kind: the price of the on-demand-only baseline and FOCUS ListCost.
on_demand_list:
  - gpu_kind: h100-80gb
    usd_per_gpu_hour: 12.29
    source: "AWS p5.48xlarge $98.32/h / 8, us-east-1, skypilot-catalog v7 aws/vms.csv; matches The Next Platform; pre June 2025 cut of up to 45%"
    date: "2023-07-27 (catalog ~2025)"
    valid_from: "2023-07-27"
    valid_until: "2025-06-01"
  - gpu_kind: h200-141gb
    usd_per_gpu_hour: 10.60
    source: "AWS p5en.48xlarge $84.80/h / 8, us-east-1, skypilot-catalog v7 (undated snapshot)"
    date: "~2025"
  - gpu_kind: a100-80gb
    usd_per_gpu_hour: 5.12
    source: "AWS p4de.24xlarge $40.96575/h / 8, us-east-1, skypilot-catalog v7 (undated snapshot)"
    date: "~2025"
  - gpu_kind: a100-40gb
    usd_per_gpu_hour: 4.10
    source: "AWS p4d.24xlarge $32.7726/h / 8, us-east-1, skypilot-catalog v7 (undated snapshot)"
    date: "~2025"

pools:
  - name: aws-p5-on-demand
    tier: on-demand
    gpu_kind: h100-80gb
    provider: aws
    region: us-east-1
    region_name: "US East (N. Virginia)"
    sku: p5.48xlarge
    usd_per_gpu_hour: 12.29
    provisioning_delay_s: 300
    source: "AWS p5.48xlarge on-demand $98.32/h / 8 (skypilot-catalog v7; The Next Platform, Jul 27 2023); provisioning delay 300 s is an assumption, not sourced"
    date: "2023-07-27 (catalog ~2025)"
    valid_from: "2023-07-27"
    valid_until: "2025-06-01"
  - name: aws-p4de-on-demand
    tier: on-demand
    gpu_kind: a100-80gb
    provider: aws
    region: us-east-1
    region_name: "US East (N. Virginia)"
    sku: p4de.24xlarge
    usd_per_gpu_hour: 5.12
    provisioning_delay_s: 300
    source: "AWS p4de.24xlarge on-demand $40.96575/h / 8 (skypilot-catalog v7, undated snapshot); delay assumed"
    date: "~2025"
  - name: aws-p5-capacity-block
    tier: reserved
    gpu_kind: h100-80gb
    provider: aws
    sku: p5.48xlarge
    commitment_type: "Capacity Block"
    commitment_category: Usage
    usd_per_gpu_hour: 4.916
    source: "AWS EC2 Capacity Blocks for ML, p5.48xlarge $39.33/h / 8 (rates before the Jan 1 2025 update)"
    date: "before 2025-01-01"
    valid_until: "2025-01-01"
  - name: aws-p5e-capacity-block
    tier: reserved
    gpu_kind: h200-141gb
    provider: aws
    sku: p5e.48xlarge
    commitment_type: "Capacity Block"
    commitment_category: Usage
    usd_per_gpu_hour: 5.408
    source: "AWS EC2 Capacity Blocks for ML, p5e.48xlarge $43.26/h / 8 (rates before the Jan 1 2025 update)"
    date: "before 2025-01-01"
    valid_until: "2025-01-01"
  - name: aws-p4d-capacity-block
    tier: reserved
    gpu_kind: a100-40gb
    provider: aws
    sku: p4d.24xlarge
    commitment_type: "Capacity Block"
    commitment_category: Usage
    usd_per_gpu_hour: 1.844
    source: "AWS EC2 Capacity Blocks for ML, p4d.24xlarge $14.75/h / 8 (rates before the Jan 1 2025 update)"
    date: "before 2025-01-01"
    valid_until: "2025-01-01"
  - name: aws-p5-spot
    tier: spot
    gpu_kind: h100-80gb
    provider: aws
    region: us-east-1
    region_name: "US East (N. Virginia)"
    sku: p5.48xlarge
    usd_per_gpu_hour: 3.25
    reclaim_notice_s: 120
    reclaim_rate_per_hour: 0.000274
    source: "observed AWS spot p5.48xlarge us-east-1 ~$21-31/h ($2.6-3.9/GPU-h, midpoint), skypilot-catalog spot snapshot (undated); notice 2 min (EC2 docs); rate = 20%/month (lower edge of the Spot Advisor's worst band; the P5 band is not established)"
    date: "point-in-time ~2025"
  - name: gcp-a3-spot
    tier: spot
    gpu_kind: h100-80gb
    provider: gcp
    sku: a3-highgpu-8g
    usd_per_gpu_hour: 2.0
    reclaim_notice_s: 30
    reclaim_rate_per_hour: 0.000274
    source: "GCP catalog H100x8 spot ~$14-18/h (midpoint / 8), skypilot-catalog (undated); notice ~30 s (unverified); rate assumed as for AWS"
    date: "point-in-time ~2025"
  - name: azure-a100-80gb-spot
    tier: spot
    gpu_kind: a100-80gb
    provider: azure
    sku: Standard_ND96amsr_A100_v4
    usd_per_gpu_hour: 0.45
    reclaim_notice_s: 30
    reclaim_rate_per_hour: 0.000274
    source: "Azure ND96amsr_A100_v4 spot ~$3.60/h / 8 (~89% off), skypilot-catalog (uncertain, undated); eviction notice >= 30 s (unverified)"
    date: "point-in-time, undated"
  # 1- and 3-year commitments (hardware-facts 4.2). GPU-specific rates are not established: the 3-year rate
  # is the documented upper bound of the discount (the strongest commitment a FinOps team could buy), the
  # 1-year the unverified third-party ~47%. Baseline `commitments_on_demand` sizes them (docs/cost.md).
  - name: aws-p5-savings-plan-1y
    tier: reserved
    gpu_kind: h100-80gb
    provider: aws
    region: us-east-1
    region_name: "US East (N. Virginia)"
    sku: p5.48xlarge
    commitment_type: "Savings Plan"
    commitment_category: Spend
    commitment_term_days: 365
    usd_per_gpu_hour: 6.5137
    source: "derived: on-demand $12.29/GPU-h less ~47% for a 1-year p5 Savings Plan (third-party claim, UNVERIFIED; hardware-facts 4.2)"
    date: "2023-07-27 (on-demand list)"
  - name: aws-p5-savings-plan-3y
    tier: reserved
    gpu_kind: h100-80gb
    provider: aws
    region: us-east-1
    region_name: "US East (N. Virginia)"
    sku: p5.48xlarge
    commitment_type: "Savings Plan"
    commitment_category: Spend
    commitment_term_days: 1095
    usd_per_gpu_hour: 3.4412
    source: "derived: on-demand $12.29/GPU-h less 72%, the EC2 Instance Savings Plan 'up to 72%' bound for 3 years (aws.amazon.com/savingsplans FAQ; GPU-specific rate not established)"
    date: "2023-07-27 (on-demand list)"
  - name: gcp-a3-cud-3y
    tier: reserved
    gpu_kind: h100-80gb
    provider: gcp
    sku: a3-highgpu-8g
    commitment_type: "Committed Use Discount"
    commitment_category: Usage
    commitment_term_days: 1095
    usd_per_gpu_hour: 4.73
    source: "derived: GCP a3-highgpu-8g on-demand ~$11/GPU-h (skypilot-catalog GCP v7, UNCERTAIN) less 57%, the generic 'up to 57%' committed-use discount (cloud.google.com; accelerator-specific rate not established)"
    date: "~2025"
  - name: owned-h100
    tier: owned
    gpu_kind: h100-80gb
    provider: onprem
    owned:
      gpus: 8
      capex_usd: 300000
      life_months: 48
      avg_power_kw: 8
      usd_per_kwh: 0.08
      pue: 1.3
      colo_kw: 10
      colo_usd_per_kw_month: 200
      other_ops_usd_per_month: 1400
      idle_power_kw: 2.5
      discount_rate_per_year: 0.08
      resale_fraction: 0.10
      utilization: 1.0
    source: "hardware-facts 4.4: 8xH100 server capex ~$300k (DGX H100 ~$270k SemiAnalysis May 2023; HGX quote ~$317k Thinkmate Aug 2024); colo ~$200/kW/month (CBRE: $184.06 H2 2024 NA, $217.30 Q1 2025 global); power 8 kW avg, $0.08/kWh, PUE 1.3 and $1.4k/month ops are assumptions; 48-month life; the finance of examples/cost/breakeven-h100.yaml (8%/year cost of capital, 10% resale, 2.5 kW idle: assumptions), power priced at the busy draw (utilization 1.0)"
    date: "2023-05 .. 2025-02"
)yaml";
  return kYaml;
}

}  // namespace tessera
