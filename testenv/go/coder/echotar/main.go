// Command echotar writes a template archive for Coder's echo provisioner, for tests that run a real Coder server.
//
//	echotar [-agent-token TOKEN] KIND [PATH]
//
// KIND is one of:
//
//	success        parse, plan and apply complete, each with log lines
//	failing-apply  the import succeeds, every workspace build fails at apply
//	with-agent     one resource with one agent (token auth; random unless -agent-token is given)
//	with-parameters  like success, with the rich parameters of withParameters (also written to main.tf, which
//	               Coder's dynamic parameters evaluate)
//
// The tar goes to PATH, or to stdout without one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/uuid"

	"github.com/coder/coder/v2/provisioner/echo"
	"github.com/coder/coder/v2/provisionersdk/proto"
)

func logLine(output string) *proto.Response {
	return &proto.Response{Type: &proto.Response_Log{Log: &proto.Log{Level: proto.LogLevel_INFO, Output: output}}}
}

func with(logs []*proto.Response, complete []*proto.Response) []*proto.Response {
	return append(append([]*proto.Response{}, logs...), complete...)
}

func ptr[T any](v T) *T { return &v }

// withParameters are the rich parameters of the with-parameters template: mutable and immutable, text, a number with
// bounds, a choice among options and one that stands for a secret. Every one has a default, so a workspace can be
// built without values.
func withParameters() []*proto.RichParameter {
	return []*proto.RichParameter{
		{Name: "region", DisplayName: "Region", Type: "string", Mutable: true, DefaultValue: "eu-west", Order: 1,
			FormType: proto.ParameterFormType_DROPDOWN,
			Options: []*proto.RichParameterOption{
				{Name: "EU West", Value: "eu-west"},
				{Name: "US East", Value: "us-east"},
			}},
		{Name: "cpus", DisplayName: "CPUs", Type: "number", Mutable: true, DefaultValue: "2", Order: 2,
			ValidationMin: ptr(int32(1)), ValidationMax: ptr(int32(8))},
		{Name: "disk", DisplayName: "Disk", Type: "string", Mutable: false, DefaultValue: "small", Order: 3},
		{Name: "api_key", DisplayName: "API key", Type: "string", Mutable: true, DefaultValue: "none", Order: 4},
	}
}

func responses(kind, agentToken string) (*echo.Responses, error) {
	switch kind {
	case "success":
		return &echo.Responses{
			Parse:          with([]*proto.Response{logLine("echotar: parse")}, echo.ParseComplete),
			ProvisionInit:  echo.InitComplete,
			ProvisionPlan:  with([]*proto.Response{logLine("echotar: plan")}, echo.PlanComplete),
			ProvisionApply: with([]*proto.Response{logLine("echotar: apply"), logLine("echotar: done")}, echo.ApplyComplete),
			ProvisionGraph: echo.GraphComplete,
		}, nil
	case "with-parameters":
		graph := []*proto.Response{{Type: &proto.Response_Graph{Graph: &proto.GraphComplete{Parameters: withParameters()}}}}
		return &echo.Responses{
			Parse:          echo.ParseComplete,
			ProvisionInit:  echo.InitComplete,
			ProvisionPlan:  echo.PlanComplete,
			ProvisionApply: echo.ApplyComplete,
			ProvisionGraph: graph,
		}, nil
	case "failing-apply":
		return &echo.Responses{
			Parse:          echo.ParseComplete,
			ProvisionInit:  echo.InitComplete,
			ProvisionPlan:  echo.PlanComplete,
			ProvisionApply: with([]*proto.Response{logLine("echotar: apply is about to fail")}, echo.ApplyFailed),
			ProvisionGraph: echo.GraphComplete,
		}, nil
	case "with-agent":
		if agentToken == "" {
			agentToken = uuid.NewString()
		}
		resources := []*proto.Resource{{
			Name: "dev",
			Type: "echo_instance",
			Agents: []*proto.Agent{{
				Id:              uuid.NewString(),
				Name:            "main",
				OperatingSystem: "linux",
				Architecture:    "amd64",
				Auth:            &proto.Agent_Token{Token: agentToken},
			}},
		}}
		// Plan is left unset: echo.Tar derives it from the graph.
		return &echo.Responses{
			Parse:          echo.ParseComplete,
			ProvisionInit:  echo.InitComplete,
			ProvisionApply: echo.ApplyComplete,
			ProvisionGraph: []*proto.Response{{Type: &proto.Response_Graph{Graph: &proto.GraphComplete{Resources: resources}}}},
		}, nil
	default:
		return nil, fmt.Errorf("unknown template kind %q (want success, failing-apply, with-agent or with-parameters)", kind)
	}
}

func run() error {
	agentToken := flag.String("agent-token", "", "agent token of the with-agent template (default: random)")
	flag.Parse()
	if flag.NArg() < 1 || flag.NArg() > 2 {
		return fmt.Errorf("usage: echotar [-agent-token TOKEN] success|failing-apply|with-agent|with-parameters [PATH]")
	}
	res, err := responses(flag.Arg(0), *agentToken)
	if err != nil {
		return err
	}
	tar, err := echo.Tar(res)
	if err != nil {
		return fmt.Errorf("writing the echo tar: %w", err)
	}
	if flag.NArg() == 2 {
		return os.WriteFile(flag.Arg(1), tar, 0o644)
	}
	_, err = os.Stdout.Write(tar)
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "echotar:", err)
		os.Exit(2)
	}
}
