// Built against minfer_scheduler alone: a room sees the rooms it names (kvcache).
#include "kvcache/block_manager.h"
#include "scheduler/scheduler.h"

int layering_probe_ok() { return sizeof(minfer::SchedulerOutput) > 0; }
