"""The real control plane for tests: upstream etcd, kube-apiserver and
kube-controller-manager (only its EndpointSlice controller) built from pinned Go modules
(tools/kube), started on 127.0.0.1 free ports and always stopped.

There is no kubelet and no container runtime: Nodes are created with their status, and
Pods are bound to nodes at creation, their status (Running, podIP, Ready) written by the
suite through the `/status` subresource, as a kubelet would.
"""
