/* Flag table, part services: the services around a run: fault tolerance, restarts, straggler
 * detection, telemetry, storage. Megatron-LM's flags that megatron-c recognises and refuses by
 * name (or, the no-ops, accepts and ignores), written first by scripts/megatron-flags-table.py
 * from Megatron's parsers at core_v0.15.0 and main (test/fixtures/megatron-flags-*.tsv); type,
 * default, group and help are Megatron's. */
#include "config/flags_table.h"

#define G_AUTORESUME .group = "autoresume"
#define G_FI .group = "fault injector"
#define G_FP .group = "ft_package"
#define G_IPR .group = "In-process restart"
#define G_MSC .group = "msc"
#define G_OL .group = "one logger"
#define G_OPENTELEMETRY .group = "opentelemetry"
#define G_RE .group = "rerun engine"
#define G_STRAGGLER .group = "straggler"
#define G_WI .group = "workload inspector"

/* One flag per entry, its fields packed as written. */
/* clang-format off */
const mc_flag_t mc_flags_services[] = {
    {.name = "--adlr-autoresume", G_AUTORESUME, TRUE_IF_GIVEN, TODO("ADLR autoresume"),
     .help = "Enable autoresume on adlr cluster."},
    {.name = "--adlr-autoresume-interval", G_AUTORESUME, INT64, .def = "1000",
     TODO("ADLR autoresume"),
     .help = "Intervals over which check for autoresumetermination signal"},
    {.name = "--app-tag-run-name", G_OL, STRING, TODO("one-logger telemetry"),
     .help = "Jobs belonging to same training run, suppose to have the same name. It will be used "
             "to track progress of a training done over multiple different jobs"},
    {.name = "--app-tag-run-version", G_OL, STRING, .def = "0.0.0", TODO("one-logger telemetry"),
     .help = "The version of the training of which current job is part of. It will be used to "
             "track the changes in the application side which might change the performance "
             "baseline"},
    {.name = "--calc-ft-timeouts", G_FP, TRUE_IF_GIVEN,
     TODO("NVIDIA Resiliency Extension fault tolerance"),
     .help = "If set, FT package will try to automatically compute the timeouts. Note: This "
             "feature is for Nvidia internal use only."},
    {.name = "--disable-msc", G_MSC, TRUE_IF_GIVEN,
     NOOP("turns off the Multi-Storage Client (a no-op at main), which megatron-c does not use"),
     .help = "[DEPRECATED] MSC is disabled by default; this flag is a no-op and will be removed "
             "in a future release."},
    {.name = "--disable-straggler-on-startup", G_STRAGGLER, TRUE_IF_GIVEN,
     TODO("the straggler detector"),
     .help = "If set, StragglerDetector is disabled on startup."},
    {.name = "--enable-ft-package", G_FP, TRUE_IF_GIVEN,
     TODO("NVIDIA Resiliency Extension fault tolerance"),
     .help = "If set, Fault Tolerance package is enabled. Note: This feature is for Nvidia "
             "internal use only."},
    {.name = "--enable-msc", G_MSC, TRUE_IF_GIVEN, TODO("the Multi-Storage Client"),
     .help = "Enable the usage of Multi-Storage Client (MSC) in Megatron Core. Disabled by "
             "default; pass this flag to opt in."},
    {.name = "--error-injection-rate", G_RE, INT64, .def = "0", GE(0), FIELD(error_injection_rate),
     IMPLEMENTED_NOTE("with --rerun-mode validate_results; which validation is hit draws from "
                      "megatron-c's own generator, not Python's random (every one at rate 1)"),
     .help = "Rate at which to inject unexpected results, e.g. 1000 means once every 1000 result "
             "validations"},
    {.name = "--error-injection-type", G_RE,
     CHOICE("correct_result", "transient_error", "persistent_error"), .def = "transient_error",
     FIELD(error_injection_type), IMPLEMENTED,
     .help = "Type of error to inject."},
    {.name = "--fault-injector-delay-start-iteration", G_FI, INT64, TODO("fault injection"),
     .help = "Start the fault delay timer after iteration N completes. If unset, fault delay "
             "timing starts from the beginning of training."},
    {.name = "--fault-injector-fault-delay", G_FI, FLOAT, TODO("fault injection"),
     .help = "Force a specific fault delay in seconds from training start or "
             "delay_start_iteration."},
    {.name = "--fault-injector-fault-probabilities", G_FI, STRING, TODO("fault injection"),
     .help = "Comma-separated list of fault probabilities (normalized at runtime)."},
    {.name = "--fault-injector-fault-types", G_FI, STRING, TODO("fault injection"),
     .help = "Comma-separated list of fault types to inject (e.g. 'hang,crash')."},
    {.name = "--fault-injector-mtti-seconds", G_FI, FLOAT, TODO("fault injection"),
     .help = "Mean time to inject (MTTI) in seconds; used when fault_delay is None."},
    {.name = "--fault-injector-num-ranks", G_FI, INT64, TODO("fault injection"),
     .help = "Number of ranks to inject faults on (random selection)."},
    {.name = "--fault-injector-offset-seconds", G_FI, FLOAT, TODO("fault injection"),
     .help = "Offset seconds added to the sampled fault delay."},
    {.name = "--fault-injector-ranks", G_FI, STRING, TODO("fault injection"),
     .help = "Comma-separated list of ranks to inject faults on."},
    {.name = "--fault-injector-seed", G_FI, INT64, TODO("fault injection"),
     .help = "RNG seed for the fault injector."},
    {.name = "--ft-num-warmup-iters", G_FP, INT64, .def = "5",
     TODO("NVIDIA Resiliency Extension fault tolerance"),
     .help = "Number of warmup iterations before monitoring step section and out-of-section "
             "timeouts. The first N iterations are excluded from timeout monitoring as they can "
             "be significantly slower than steady-state. Default: 5. Note: This feature is for "
             "Nvidia internal use only."},
    {.name = "--inprocess-active-world-size", G_IPR, INT64, .def = "1", TODO("in-process restart"),
     .help = "The number of ranks initially executing the workload. The remaining ranks from the "
             "allocation are set aside as warm reserve."},
    {.name = "--inprocess-barrier-timeout", G_IPR, FLOAT, .def = "120", TODO("in-process restart"),
     .help = "Timeout (in seconds) for internal distributed barrier"},
    {.name = "--inprocess-completion-timeout", G_IPR, FLOAT, .def = "120",
     TODO("in-process restart"),
     .help = "Timeout (in seconds) for barrier on completion on all ranks"},
    {.name = "--inprocess-empty-cuda-cache", G_IPR, TRUE_IF_GIVEN, TODO("in-process restart"),
     .help = "Release all unoccupied cached GPU memory on every in-process restart."},
    {.name = "--inprocess-granularity", G_IPR, CHOICE("node", "rank"), .def = "node",
     TODO("in-process restart"),
     .help = "Granularity for in-process restart."},
    {.name = "--inprocess-hard-timeout", G_IPR, FLOAT, .def = "90", TODO("in-process restart"),
     .help = "Hard progress timeout (in seconds)."},
    {.name = "--inprocess-heartbeat-interval", G_IPR, FLOAT, .def = "30",
     TODO("in-process restart"),
     .help = "Monitoring interval (in seconds) for detecting unresponsive ranks."},
    {.name = "--inprocess-heartbeat-timeout", G_IPR, FLOAT, .def = "60",
     TODO("in-process restart"),
     .help = "Timeout (in seconds) for a missing rank detection heartbeat."},
    {.name = "--inprocess-last-call-wait", G_IPR, FLOAT, .def = "1", TODO("in-process restart"),
     .help = "Time interval (in seconds) for other ranks to report concurrent terminal failures."},
    {.name = "--inprocess-max-iterations", G_IPR, INT64, TODO("in-process restart"),
     .help = "Maximum number of in-process restart iterations."},
    {.name = "--inprocess-monitor-process-interval", G_IPR, FLOAT, .def = "1.0",
     TODO("in-process restart"),
     .help = "Monitoring interval (in seconds) for the monitoring process."},
    {.name = "--inprocess-monitor-thread-interval", G_IPR, FLOAT, .def = "1.0",
     TODO("in-process restart"),
     .help = "Monitoring interval (in seconds) for the monitoring thread."},
    {.name = "--inprocess-progress-watchdog-interval", G_IPR, FLOAT, .def = "1.0",
     TODO("in-process restart"),
     .help = "Interval (in seconds) for automatic progress watchdog timestamp updates."},
    {.name = "--inprocess-restart", G_IPR, TRUE_IF_GIVEN, TODO("in-process restart"),
     .help = "Enables in-process restart."},
    {.name = "--inprocess-soft-timeout", G_IPR, FLOAT, .def = "60", TODO("in-process restart"),
     .help = "Soft progress timeout (in seconds)."},
    {.name = "--inprocess-termination-grace-time", G_IPR, FLOAT, .def = "1",
     TODO("in-process restart"),
     .help = "Interval (in seconds) between SIGTERM and SIGKILL issued on hard timeout"},
    {.name = "--log-straggler", G_STRAGGLER, TRUE_IF_GIVEN, TODO("the straggler detector"),
     .help = "If set, tracks and logs straggler per GPU."},
    {.name = "--no-one-logger", G_OL, FALSE_IF_GIVEN, TODO("one-logger telemetry"),
     .help = "If set, disable using one_logger to track E2E metricsNote that one_logger is an "
             "internal tool and not available externally. For installation, please go to "
             "https://confluence.nvidia.com/display/MLWFO/Package+Repositoriesfor more details"},
    {.name = "--one-logger-async", G_OL, TRUE_IF_GIVEN, TODO("one-logger telemetry"),
     .help = "If set, forces one_logger to use async mode."},
    {.name = "--one-logger-project", G_OL, STRING, .def = "megatron-lm",
     TODO("one-logger telemetry"),
     .help = "The one-logger project name. Will ignore if --no-one-logger is set"},
    {.name = "--one-logger-run-name", G_OL, STRING, TODO("one-logger telemetry"),
     .help = "The one-logger run name displayed. Will ignore if --no-one-logger is set"},
    {.name = "--otel-enabled", G_OPENTELEMETRY, TRUE_IF_GIVEN, TODO("OpenTelemetry tracing"),
     .help = "Enable OpenTelemetry telemetry (traces and metrics). See MEGATRON_OTEL_ENABLED env "
             "var for the env-var equivalent."},
    {.name = "--otel-service-name", G_OPENTELEMETRY, STRING, TODO("OpenTelemetry tracing"),
     .help = "Override OTEL_SERVICE_NAME for this training run."},
    {.name = "--otel-span-groups", G_OPENTELEMETRY, STRING, TODO("OpenTelemetry tracing"),
     .help = "Comma-separated span-group spec controlling which OTel instrumentation boundaries "
             "are active.  Accepts preset keywords (\"default\", \"per_step\", \"full\", \"all\") "
             "or individual group names (\"job\", \"checkpoint\", \"evaluate\", \"model_init\", "
             "\"load_checkpoint\", \"step\", \"forward_backward\", \"optimizer\", "
             "\"microbatch\"), or a mix.  Defaults to \"default\" (coarse job/checkpoint/evaluate "
             "spans only).  Equivalent to MEGATRON_OTEL_SPAN_GROUPS env var."},
    {.name = "--run-workload-inspector-server", G_WI, TRUE_IF_GIVEN,
     TODO("the workload inspector server"),
     .help = "If set, enables workload inspector server for on-demand profiling."},
    {.name = "--straggler-ctrlr-port", G_STRAGGLER, INT64, .def = "65535",
     TODO("the straggler detector"),
     .help = "Port number to toggle StragglerDetector on/off at runtime"},
    {.name = "--straggler-minmax-count", G_STRAGGLER, INT64, .def = "1",
     TODO("the straggler detector"),
     .help = "Number of ranks to report with high/low estimated throughput"},
};
/* clang-format on */

const size_t mc_flags_services_count = sizeof(mc_flags_services) / sizeof(mc_flags_services[0]);
