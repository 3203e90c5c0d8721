//! `coder_k8s_mcp_tool_calls_total`: the tool calls the MCP server answered, by tool and outcome (`ok`, `error` for a
//! tool error such as a refused or failed action, `invalid` for a call the protocol refused: an unknown tool or
//! arguments that do not fit its schema). A name that is no tool is counted as `unknown`, so a caller cannot grow the
//! series. Cheap to clone; every clone counts into the same series.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
    Invalid,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Invalid => "invalid",
        }
    }
}

/// The tool-call counter of one server.
#[derive(Clone, Debug, Default)]
pub struct ToolMetrics {
    calls: Family<CallLabels, Counter>,
}

impl ToolMetrics {
    /// Registers the series in `registry` (the process's `/metrics`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "coder_k8s_mcp_tool_calls",
            "Tool calls the MCP server answered, by tool and outcome (ok, error, invalid)",
            self.calls.clone(),
        );
    }

    /// Counts one call of `tool` (already `unknown` when it names no tool) that ended with `outcome`.
    pub fn called(&self, tool: &str, outcome: Outcome) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// The calls counted so far for `tool` with `outcome` (tests).
    pub fn count(&self, tool: &str, outcome: Outcome) -> u64 {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                outcome: outcome.as_str(),
            })
            .get()
    }
}
