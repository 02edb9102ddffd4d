package baseindex_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/internal/baseindex"
)

func TestContent(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) { testContent(t, f) })
	}
}

func testContent(t *testing.T, f form) {
	bigUnit := "[Unit]\n" + strings.Repeat("#", 64<<10)
	maxUnit := strings.Repeat("u", 64<<10)
	layers, _ := f.layers(t, [][]ent{
		{
			file("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"),
			file("etc/group", ""),
			file("usr/lib/passwd", "core:x:1000:1000::/var/home/core:/bin/bash\n"),
			file("usr/lib/group", "wheel:x:10:\n"),
			file("usr/lib/systemd/system-preset/90-default.preset", "disable *\n"),
			file("usr/lib/systemd/system-preset/sub/nested.preset", "enable a.service\n"),
			file("etc/systemd/system-preset/10-local.preset", "enable b.service\n"),
			file("usr/lib/systemd/system/sshd.service", "[Unit]\nDescription=sshd\n"),
			file("usr/lib/systemd/system/big.service", bigUnit),
			file("usr/lib/systemd/system/max.service", maxUnit),
			file("usr/lib/systemd/system/sshd.service.d/10-x.conf", "[Service]\n"),
			file("etc/systemd/system/crio.service.d/20-y.conf", "[Install]\nWantedBy=a.target\n"),
			file("usr/lib/systemd/system/service.d/deep/10-z.conf", "[Service]\n"),
			file("usr/lib/systemd/system/multi-user.target.wants/x.conf", "x\n"),
			file("lib/systemd/system/old.service", "[Unit]\n"),
			file("etc/systemd/system/crio.service", "[Unit]\nDescription=crio\n"),
			symlink("etc/systemd/system/multi-user.target.wants/sshd.service", "/usr/lib/systemd/system/sshd.service"),
			file("etc/hostname", "node\n"),
			file("etc/to-be-replaced/passwd", "nope"),
		},
		{
			file("etc/group", "root:x:0:\n"),
			symlink("usr/lib/group", "../../etc/group"),
		},
	})
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string
		kept bool
	}{
		{path: "etc/passwd", want: "root:x:0:0:root:/root:/bin/bash\n", kept: true},
		{path: "/etc/passwd", want: "root:x:0:0:root:/root:/bin/bash\n", kept: true},
		{path: "etc/group", want: "root:x:0:\n", kept: true},
		{path: "usr/lib/passwd", want: "core:x:1000:1000::/var/home/core:/bin/bash\n", kept: true},
		{path: "usr/lib/group"}, // now a symlink
		{path: "usr/lib/systemd/system-preset/90-default.preset", want: "disable *\n", kept: true},
		{path: "usr/lib/systemd/system-preset/sub/nested.preset", want: "enable a.service\n", kept: true},
		{path: "etc/systemd/system-preset/10-local.preset", want: "enable b.service\n", kept: true},
		{path: "usr/lib/systemd/system/sshd.service", want: "[Unit]\nDescription=sshd\n", kept: true},
		{path: "usr/lib/systemd/system/max.service", want: maxUnit, kept: true},
		{path: "usr/lib/systemd/system/big.service"},
		{path: "usr/lib/systemd/system/sshd.service.d/10-x.conf", want: "[Service]\n", kept: true},
		{path: "etc/systemd/system/crio.service.d/20-y.conf", want: "[Install]\nWantedBy=a.target\n", kept: true},
		{path: "usr/lib/systemd/system/service.d/deep/10-z.conf"},
		{path: "usr/lib/systemd/system/multi-user.target.wants/x.conf"},
		{path: "lib/systemd/system/old.service", want: "[Unit]\n", kept: true},
		{path: "etc/systemd/system/crio.service", want: "[Unit]\nDescription=crio\n", kept: true},
		{path: "etc/systemd/system/multi-user.target.wants/sshd.service"},
		{path: "etc/hostname"},
		{path: "etc/to-be-replaced/passwd"},
		{path: "etc/missing"},
	}
	for _, tt := range tests {
		got, ok := ix.Content(tt.path)
		if ok != tt.kept || string(got) != tt.want {
			t.Errorf("Content(%q) = %.40q, %v, want %.40q, %v", tt.path, got, ok, tt.want, tt.kept)
		}
	}
}

func TestContentEmptyFileIsKept(t *testing.T) {
	for _, f := range forms {
		layers, _ := f.layers(t, [][]ent{{file("etc/group", "")}})
		ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := ix.Content("etc/group"); !ok || len(got) != 0 {
			t.Errorf("%s: Content(etc/group) = %q, %v, want \"\", true", f.name, got, ok)
		}
	}
}

func TestContentTooLarge(t *testing.T) {
	for _, f := range forms {
		layers, _ := f.layers(t, [][]ent{{file("etc/passwd", strings.Repeat("x", 4<<20+1))}})
		_, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
		if err == nil || !strings.Contains(err.Error(), `"etc/passwd" is 4194305 bytes, more than the 4 MiB mcbake reads of it`) {
			t.Fatalf("%s: Build() error = %v, want one about etc/passwd's size", f.name, err)
		}
	}
}

// TestContentThroughHardlinks covers hardlinks at kept paths, as
// ostree-ext layers have for every file: the object comes first, then the
// hardlinks to it.
func TestContentThroughHardlinks(t *testing.T) {
	obj := func(n string) string { return "sysroot/ostree/repo/objects/" + n + ".file" }
	filler := func(n int) []ent {
		var out []ent
		for i := range n {
			out = append(out, file(obj("filler"+strings.Repeat("f", i)), "filler"))
		}
		return out
	}
	tests := []struct {
		name      string
		layers    [][]ent
		path      string
		want      string
		wantOpens int32
		wantErr   string
	}{
		{
			name: "object right before its links",
			layers: [][]ent{{
				file(obj("aa"), "[Unit]\nDescription=kubelet\n"),
				hardlink("usr/lib/systemd/system/kubelet.service", obj("aa")),
				hardlink("usr/lib/systemd/system/kubelet-alias.service", obj("aa")),
			}},
			path:      "usr/lib/systemd/system/kubelet-alias.service",
			want:      "[Unit]\nDescription=kubelet\n",
			wantOpens: 1,
		},
		{
			name: "object far before its link takes a second pass",
			layers: [][]ent{append(append(
				[]ent{file(obj("bb"), "root:x:0:0::/root:/bin/bash\n")},
				filler(10)...),
				hardlink("etc/passwd", obj("bb")),
			)},
			path:      "etc/passwd",
			want:      "root:x:0:0::/root:/bin/bash\n",
			wantOpens: 2,
		},
		{
			name: "large object takes a second pass",
			layers: [][]ent{{
				file(obj("cc"), strings.Repeat("p", 100<<10)),
				hardlink("etc/passwd", obj("cc")),
			}},
			path:      "etc/passwd",
			want:      strings.Repeat("p", 100<<10),
			wantOpens: 2,
		},
		{
			name: "object replaced after the link keeps the linked content",
			layers: [][]ent{{
				file(obj("dd"), "old\n"),
				hardlink("etc/group", obj("dd")),
				file(obj("dd"), "new\n"),
			}},
			path:      "etc/group",
			want:      "old\n",
			wantOpens: 1,
		},
		{
			name: "link to a link far away",
			layers: [][]ent{append(append(
				[]ent{file(obj("ee"), "g1\n"), hardlink("usr/share/x", obj("ee"))},
				filler(10)...),
				hardlink("etc/group", "usr/share/x"),
			)},
			path:      "etc/group",
			want:      "g1\n",
			wantOpens: 2,
		},
		{
			name: "link to a kept path in a lower layer",
			layers: [][]ent{
				{file("usr/lib/systemd/system/a.service", "[Unit]\n")},
				{hardlink("lib/systemd/system/a.service", "usr/lib/systemd/system/a.service")},
			},
			path:      "lib/systemd/system/a.service",
			want:      "[Unit]\n",
			wantOpens: 1,
		},
		{
			name: "link to an unkept path in a lower layer",
			layers: [][]ent{
				{file(obj("ff"), "[Unit]\n")},
				{hardlink("etc/systemd/system/a.service", obj("ff"))},
			},
			wantErr: "hardlink across layers",
		},
		{
			name: "link to an object too large for passwd",
			layers: [][]ent{{
				file(obj("hh"), strings.Repeat("p", 4<<20+1)),
				hardlink("etc/passwd", obj("hh")),
			}},
			wantErr: `hardlink "etc/passwd" to "` + obj("hh") + `": "etc/passwd" is 4194305 bytes`,
		},
		{
			name: "link to a big unit is not kept",
			layers: [][]ent{
				{file(obj("gg"), strings.Repeat("u", 64<<10+1))},
				{hardlink("etc/systemd/system/a.service", obj("gg"))},
			},
			path:      "etc/systemd/system/a.service",
			wantOpens: 1,
		},
	}
	for _, f := range forms {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				layers, ok := f.layers(t, tt.layers)
				if !ok {
					t.Skipf("%s cannot hold these layers", f.name)
				}
				ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Build() error = %v, want one containing %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Build() error = %v", err)
				}
				got, ok := ix.Content(tt.path)
				if ok != (tt.want != "") || string(got) != tt.want {
					t.Errorf("Content(%q) = %.40q, %v, want %.40q", tt.path, got, ok, tt.want)
				}
				if got := layers[len(layers)-1].opens.Load(); f.name == "blob" && got != tt.wantOpens {
					t.Errorf("top layer opened %d times, want %d", got, tt.wantOpens)
				}
			})
		}
	}
}
