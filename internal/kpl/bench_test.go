package kpl

import (
	"crypto/md5"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchShapes are realistic aggregates: KPL producers typically put 1 to a
// few hundred user records into aggregates of up to 50 KiB.
var benchShapes = []struct {
	records, minSize, maxSize int
}{
	{1, 100, 1000},
	{10, 100, 1000},
	{50, 100, 1000},
	{500, 100, 100},
}

// benchAggregate packs n records of minSize to maxSize bytes (seeded, so every
// run measures the same bytes), each with its own UUID-like partition key as
// producers that spread load randomly use.
func benchAggregate(b *testing.B, n, minSize, maxSize int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	recs := make([]UserRecord, n)
	for i := range recs {
		data := make([]byte, minSize+rng.IntN(maxSize-minSize+1))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		recs[i] = UserRecord{
			PartitionKey: fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff,
				rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff),
			Data: data,
		}
	}
	return mustPack(b, recs).Data
}

// BenchmarkUnpack measures Unpack against a baseline measured in the same
// run: md5, the digest check alone, which no reader of aggregates can skip.
// unpack/md5 is the cost of the whole call over that unavoidable minimum;
// decode is Unpack's work after the digest check (unpack ≈ md5 + decode);
// unpack+hashkeys adds the per-record shard check an input makes after a
// reshard (hash key of every record tested against a shard's range).
func BenchmarkUnpack(b *testing.B) {
	for _, s := range benchShapes {
		data := benchAggregate(b, s.records, s.minSize, s.maxSize)
		name := fmt.Sprintf("records=%d/size=%d-%d", s.records, s.minSize, s.maxSize)
		perRecord := func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.Cleanup(func() {
				b.ReportMetric(float64(s.records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
		b.Run(name+"/md5", func(b *testing.B) {
			perRecord(b)
			msg := data[magicLen : len(data)-digestLen]
			for b.Loop() {
				md5.Sum(msg)
			}
		})
		b.Run(name+"/unpack", func(b *testing.B) {
			perRecord(b)
			var u Unpacker
			dst := make([]UserRecord, 0, s.records)
			for b.Loop() {
				if _, _, err := u.Unpack(dst[:0], data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decode", func(b *testing.B) {
			perRecord(b)
			var u Unpacker
			dst := make([]UserRecord, 0, s.records)
			msg := data[magicLen : len(data)-digestLen]
			for b.Loop() {
				if _, err := u.decode(dst[:0], msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/unpack+hashkeys", func(b *testing.B) {
			perRecord(b)
			var u Unpacker
			dst := make([]UserRecord, 0, s.records)
			shard, _ := ParseHashKeyRange("0", "170141183460469231731687303715884105727")
			kept := 0
			for b.Loop() {
				recs, _, err := u.Unpack(dst[:0], data)
				if err != nil {
					b.Fatal(err)
				}
				for i := range recs {
					if k, err := recs[i].HashKey(); err == nil && shard.Contains(k) {
						kept++
					}
				}
			}
		})
	}
}

// BenchmarkPack measures the producer side, for the demo and tests.
func BenchmarkPack(b *testing.B) {
	recs, _, err := Unpack(nil, benchAggregate(b, 50, 100, 1000))
	if err != nil {
		b.Fatal(err)
	}
	var builder Builder
	for b.Loop() {
		builder.Reset()
		for _, r := range recs {
			if err := builder.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := builder.Build(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkHashKey measures the per-record pieces of the shard check.
func BenchmarkHashKey(b *testing.B) {
	const ehk = "226854911280625642308916404954512140970"
	shard, _ := ParseHashKeyRange("113427455640312821154458202477256070485", "226854911280625642308916404954512140970")
	b.Run("partition", func(b *testing.B) {
		for b.Loop() {
			PartitionHashKey("4f8a1c2e-9b3d-4e7f-a6c5-0d1e2f3a4b5c")
		}
	})
	b.Run("explicit", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseHashKey(ehk); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("contains", func(b *testing.B) {
		k := HashKey{Hi: 1 << 63}
		for b.Loop() {
			shard.Contains(k)
		}
	})
}
