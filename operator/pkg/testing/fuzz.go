/*
Copyright The Convoy Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package testing

import "encoding/binary"

// FuzzBytes hands out values taken from a fuzz input, so that a fuzz test builds a well-formed
// object (a job, its pods) whose every choice the fuzzer steers. Once the input runs out every value
// is zero: any input builds something.
type FuzzBytes struct{ data []byte }

// NewFuzzBytes reads from data.
func NewFuzzBytes(data []byte) *FuzzBytes { return &FuzzBytes{data: data} }

// Byte returns the next byte, or 0.
func (b *FuzzBytes) Byte() byte {
	if len(b.data) == 0 {
		return 0
	}
	v := b.data[0]
	b.data = b.data[1:]
	return v
}

// Bool returns the low bit of the next byte.
func (b *FuzzBytes) Bool() bool { return b.Byte()&1 == 1 }

// Intn returns a number in [0, n), n at most 256·256.
func (b *FuzzBytes) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := int(b.Byte())
	if n > 256 {
		v = v<<8 | int(b.Byte())
	}
	return v % n
}

// Int32 returns any int32, negative ones and the extremes included.
func (b *FuzzBytes) Int32() int32 {
	var buf [4]byte
	for i := range buf {
		buf[i] = b.Byte()
	}
	return int32(binary.LittleEndian.Uint32(buf[:]))
}

// Bytes returns up to max bytes of the input, as they are (not necessarily UTF-8).
func (b *FuzzBytes) Bytes(max int) []byte {
	n := min(b.Intn(max+1), len(b.data))
	v := b.data[:n]
	b.data = b.data[n:]
	return v
}

// Pick returns one of options.
func Pick[T any](b *FuzzBytes, options ...T) T {
	return options[b.Intn(len(options))]
}
