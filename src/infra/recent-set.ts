/**
 * A set that keeps at most `capacity` members, forgetting the least recently added first: for
 * what a process may remember to save a read, and lose without harm.
 */
export class RecentSet<T> {
  private readonly members = new Set<T>();

  constructor(private readonly capacity: number) {}

  has(member: T): boolean {
    return this.members.has(member);
  }

  add(member: T): void {
    this.members.delete(member);
    this.members.add(member);
    if (this.members.size > this.capacity) {
      this.members.delete(this.members.values().next().value as T);
    }
  }

  delete(member: T): void {
    this.members.delete(member);
  }
}
