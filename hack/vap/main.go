// Command vap evaluates a ValidatingAdmissionPolicy the way kube-apiserver does, with the API server's own code
// (k8s.io/apiserver's validating admission policy plugin, the same release as the test bed's kube-apiserver): the
// policy's matchConditions, variables, validations and messageExpressions, against objects given on stdin.
//
// It only leaves out what decides *whether* a policy applies (matchConstraints, the binding's selectors, the
// paramRef lookup): the caller hands it the params object. tests/chart/test_policy_chart.py uses it to run one
// table of cases through the chart's CEL and through operator/tabjob/api/platform_policy.py.
//
// stdin:  {"policy": <ValidatingAdmissionPolicy>, "params": <object or null>,
//
//	"requests": [{"object": ..., "oldObject": ..., "namespace": "ns", "operation": "CREATE"}]}
//
// stdout: [{"denied": ["message", ...], "errors": ["message", ...]}, ...] in the order of requests.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

type request struct {
	Object    map[string]any `json:"object"`
	OldObject map[string]any `json:"oldObject"`
	Namespace string         `json:"namespace"`
	Operation string         `json:"operation"`
}

type input struct {
	Policy   admissionv1.ValidatingAdmissionPolicy `json:"policy"`
	Params   map[string]any                        `json:"params"`
	Requests []request                             `json:"requests"`
}

type verdict struct {
	Denied []string `json:"denied"`
	Errors []string `json:"errors"`
}

// compile is validating.compilePolicy (unexported there), step for step.
func compile(policy *admissionv1.ValidatingAdmissionPolicy) validating.Validator {
	hasParam := policy.Spec.ParamKind != nil
	optionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false}
	env, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName,
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		panic(err)
	}
	compiler := plugincel.NewCompositedCompilerFromTemplate(env)
	variables := make([]plugincel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i, v := range policy.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, optionalVars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if n := len(policy.Spec.MatchConditions); n > 0 {
		conditions := make([]plugincel.ExpressionAccessor, n)
		for i := range policy.Spec.MatchConditions {
			conditions[i] = (*matchconditions.MatchCondition)(&policy.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conditions, optionalVars,
			environment.StoredExpressions), policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		reason := v.Reason
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	none := compiler.CompileCondition(nil, optionalVars, environment.StoredExpressions)
	return validating.NewValidator(
		compiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		none,
		compiler.CompileCondition(messages, messageVars, environment.StoredExpressions),
		policy.Spec.FailurePolicy,
	)
}

func object(m map[string]any) runtime.Object {
	if m == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: m}
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "vap: reading stdin:", err)
		os.Exit(2)
	}
	validator := compile(&in.Policy)
	var params runtime.Object
	if in.Params != nil {
		params = object(in.Params)
	}
	out := make([]verdict, 0, len(in.Requests))
	for _, r := range in.Requests {
		obj := object(r.Object)
		gvk := obj.GetObjectKind().GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "tabularjobs"}
		name, _, _ := unstructured.NestedString(r.Object, "metadata", "name")
		attr := admission.NewAttributesRecord(obj, object(r.OldObject), gvk, r.Namespace, name, gvr, "",
			admission.Operation(r.Operation), &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "tester"})
		versioned := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: obj,
			VersionedOldObject: object(r.OldObject)}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
		result := validator.Validate(context.Background(), gvr, versioned, params, ns,
			celconfig.RuntimeCELCostBudget, nil)
		v := verdict{Denied: []string{}, Errors: []string{}}
		for _, d := range result.Decisions {
			switch {
			case d.Evaluation == validating.EvalError:
				v.Errors = append(v.Errors, d.Message)
			case d.Action == validating.ActionDeny:
				v.Denied = append(v.Denied, d.Message)
			}
		}
		out = append(out, v)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "vap: writing stdout:", err)
		os.Exit(2)
	}
}
