// Package topicadmin makes sure the topics an example program writes to
// exist, creating missing ones with CreateTopics over a [protocol.Conn].
// It is what longhaul's examples use instead of an admin client, to keep
// their dependencies to longhaul's own packages and kmsg.
//
// # Entry point
//
// [Ensure] dials the first reachable bootstrap server, looks
// the topics up with Metadata, creates the missing ones (with their
// configs, for example producer.state.batches.to.retain) and waits until
// every partition has a leader. ctx bounds the whole call; nothing keeps
// running after it returns.
//
// # Concurrency
//
// Ensure is safe for concurrent use.
package topicadmin
