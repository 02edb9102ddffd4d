module github.com/mcbake/mcbake/examples/library

go 1.26.8

require (
	github.com/mcbake/mcbake v0.0.0
	github.com/opencontainers/go-digest v1.0.0
)

require (
	github.com/aws/aws-sdk-go-v2 v1.39.2 // indirect
	github.com/coreos/go-json v0.0.0-20230131223807-18775e0fb4fb // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/coreos/ignition/v2 v2.24.0 // indirect
	github.com/coreos/vcontext v0.0.0-20230201181013-d72178a18687 // indirect
	github.com/cyphar/filepath-securejoin v0.4.1 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/vincent-petithory/dataurl v1.0.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

replace github.com/mcbake/mcbake => ../..
