// Names on disk: <cacheDir>/<component>/<resource>.<version>.<group>/, the hub's own state beside
// them, and what else a cache dir may hold.
import { lockFilePrefix } from './lock.ts'

/** The hub's own small state (not apiserver objects) lives here, apart from the collections. */
export const stateDir = '_state'

/** Longest path component accepted (component and resource directory names). */
const maxComponentLength = 253
/**
 * Components are lower-cased User-Agent products and resource directories `<plural>.<version>.<group>`:
 * anything else (`/`, `\0`, `%`, upper case, a leading `.`, so never `.` or `..`) is refused.
 */
const componentPattern = /^[a-z0-9][-a-z0-9._:]*$/

export function validPathComponent(value: string): boolean {
  return value.length <= maxComponentLength && componentPattern.test(value)
}

export function checkComponent(what: string, value: string): void {
  if (typeof value !== 'string' || !validPathComponent(value)) {
    throw new Error(
      `disk cache: invalid ${what} ${JSON.stringify(value)}: must match ${componentPattern.source} and be at most ${maxComponentLength} characters`,
    )
  }
}

/** Entries of the cache dir that are not components: the state, the lock's files, a filesystem's lost+found. */
export function notACollection(name: string): boolean {
  return name === stateDir || name === 'lost+found' || name.startsWith(lockFilePrefix)
}
