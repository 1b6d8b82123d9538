// Package kubernetes holds cordon serve's Kubernetes deployment, a
// Kustomize base (kubectl apply -k deploy/kubernetes), and the test that
// renders it with Kustomize and checks every object it makes. It has no
// code of its own: see README.md.
package kubernetes
