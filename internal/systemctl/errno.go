package systemctl

import "syscall"

// The port keeps systemd's convention: a negative errno is an error.
const (
	eNOENT        = int(syscall.ENOENT)
	eIO           = int(syscall.EIO)
	eEXIST        = int(syscall.EEXIST)
	eNOTDIR       = int(syscall.ENOTDIR)
	eISDIR        = int(syscall.EISDIR)
	eINVAL        = int(syscall.EINVAL)
	eNOTTY        = int(syscall.ENOTTY)
	eNOTEMPTY     = int(syscall.ENOTEMPTY)
	eLOOP         = int(syscall.ELOOP)
	eNOLINK       = int(syscall.ENOLINK)
	eBADFD        = int(syscall.EBADFD)
	eBADMSG       = int(syscall.EBADMSG)
	eACCES        = int(syscall.EACCES)
	eXDEV         = int(syscall.EXDEV)
	eRFKILL       = int(syscall.ERFKILL)
	eADDRNOTAVAIL = int(syscall.EADDRNOTAVAIL)
	eBADSLT       = int(syscall.EBADSLT)
	eIDRM         = int(syscall.EIDRM)
	eUCLEAN       = int(syscall.EUCLEAN)
	eNAMETOOLONG  = int(syscall.ENAMETOOLONG)
	eNOBUFS       = int(syscall.ENOBUFS)
	eUNATCH       = int(syscall.EUNATCH)
	eTXTBSY       = int(syscall.ETXTBSY)
	eNOEXEC       = int(syscall.ENOEXEC)
)

// eNODE is not an errno: a specifier whose value only the node knows
// (its hostname, machine ID, boot ID, kernel, architecture).
const eNODE = 1 << 20
