// Package pb holds the protobuf messages and gRPC stubs generated from the
// .proto files beside it (package weft.block.v1 and later services).
//
// It is not hand-written: edit the .proto files and run internal/rpc/gen.sh;
// the code using these types lives in the packages owning each service.
package pb
